package zoo_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest/tier"
	"github.com/converge-lab/converge/zoo"
)

var (
	exploreSeeds = flag.Int("zoo.explore-seeds", 1, "explorations of each correct controller on each world, with different seeds (false alarms)")
	exploreAll   = flag.Bool("zoo.explore-all", false, "explore every mutant on every world, not only the world that finds it")
)

// explored is a controller, the worlds it is explored on (fault-free
// scenarios, or the worlds of fault scenarios without their faults) and
// its mutants.
type explored struct {
	name    string
	worlds  []*scenarios.Scenario
	mutants []zoo.Mutant // the control first
	// foundIn names, for each mutant exploration finds, the world it is
	// found in; missed says why the others are not found.
	foundIn map[string]string
	missed  map[string]string
}

func exploredControllers(t *testing.T) []explored {
	t.Helper()
	catalogue, err := scaler.Catalogue()
	require.NoError(t, err)
	sc := explored{name: "scaler", mutants: append([]zoo.Mutant{zoo.Control()}, zoo.Mutants()...),
		foundIn: map[string]string{
			"no-cache-sync": "late-start", "done-skipped": "baseline", "blind-write": "flapping-readiness",
			"hot-loop": "baseline", "tombstone-panic": "tombstone", "retry-no-backoff": "baseline", "no-cooldown": "baseline",
			"deployments-only": "flapping-readiness", "split-write": "baseline", "list-per-reconcile": "flapping-readiness",
			"cache-mutation": "baseline", "drops-on-conflict": "baseline", "no-precondition": "restart-into-the-past",
		},
		missed: map[string]string{
			"gives-up": "in every world pods become ready, so the key it dropped is enqueued again by the next pod event, and the " +
				"late decision is one a correct controller that acted late would make too",
			"no-release": "a SIGTERM after a write lets the instance drain its queue: the successor that waits out the Lease " +
				"has nothing left to do, so no outcome changes",
		}}
	// The catalogue's fault-free scenarios, and the worlds of three others
	// without their faults: pods deleted by an evictor, a controller that
	// starts on a settled world, and one whose budget allows each
	// Deployment a single write.
	for _, name := range []string{"baseline", "flapping-readiness", "tombstone", "late-start", "restart-into-the-past"} {
		i := slices.IndexFunc(catalogue, func(s *scenarios.Scenario) bool { return s.Name == name })
		require.GreaterOrEqual(t, i, 0)
		sc.worlds = append(sc.worlds, explore.WithoutFaults(catalogue[i]))
	}
	out := []explored{sc}
	foundIn := map[string]map[string]string{
		"webapp": {"stale-status": "webapp", "finalizer-early": "teardown", "no-owner": "webapp", "requeue-storm": "webapp",
			"ignore-conflict": "webapp"},
		"mirror": {"no-source-watch": "mirror", "orphan-targets": "mirror", "stale-status": "mirror", "tombstone-panic": "target-deleted",
			"status-from-cache": "mirror", "delete-by-name": "target-handed-over",
			"kept-mirrors": "mirror-deleted", "tombstone-ignored": "target-deleted", "removed-targets-kept": "target-handed-over"},
	}
	missed := map[string]map[string]string{
		"webapp": {
			"scale-up-only": "no fault changes the WebApp's input: input exploration (explore.InputPoints) finds it " +
				"(TestInputPointsFindTheExamplesInputMutants)",
			"port-on-create": "no fault changes the WebApp's input: input exploration (explore.InputPoints) finds it " +
				"(TestInputPointsFindTheExamplesInputMutants)",
		},
		"mirror": {"retry-no-backoff": "its retries are paced by the client's rate limit, not a spin, so only an error that " +
			"lasts (stubborn-target's 12 s of 500s, written by hand) tells them from backed-off ones; a point fails one " +
			"request, or " + fmt.Sprint(explore.StormLength) + " in a row, which both retry through in as many requests",
			"first-target": "no fault changes the Mirror's input: input exploration (explore.InputPoints) finds it " +
				"(TestInputPointsFindTheExamplesInputMutants)",
		},
	}
	// The worlds of each example's scenarios, without their faults; not
	// stubborn-target's, whose request budget is sized for its own fault.
	worlds := map[string][]string{"webapp": {"webapp", "teardown"}, "mirror": {"mirror", "target-deleted", "target-handed-over", "mirror-deleted"}}
	for _, ex := range examples(t) {
		all, err := scenarios.LoadDir(ex.dir)
		require.NoError(t, err)
		e := explored{name: ex.name, mutants: ex.mutants, foundIn: foundIn[ex.name], missed: missed[ex.name]}
		for _, s := range all {
			if slices.Contains(worlds[ex.name], s.Name) {
				e.worlds = append(e.worlds, explore.WithoutFaults(s))
			}
		}
		require.Len(t, e.worlds, len(worlds[ex.name]))
		out = append(out, e)
	}
	return out
}

// TestExplore explores each controller's worlds with its control and its
// mutants. The control must have no finding in any world (over
// -zoo.explore-seeds seeds); each mutant must have one in the world named
// for it. With -zoo.explore-all, every mutant runs in every world, and the
// missed ones must still be missed. The mutants' explorations are of the
// full tier: under -short only the controls run, each in its controller's
// first world (no false alarm is presubmit; scenarios/explore's own tests
// find bugs there).
func TestExplore(t *testing.T) {
	for _, c := range exploredControllers(t) {
		t.Run(c.name, func(t *testing.T) {
			var lines []string
			for _, m := range c.mutants {
				if *only != "" && m.Name != "control" && !slices.Contains(strings.Split(*only, ","), m.Name) {
					continue
				}
				found := 0
				for _, w := range c.worlds {
					seeds := 1
					switch {
					case m.Name == "control":
						seeds = *exploreSeeds
					case !*exploreAll && c.foundIn[m.Name] != w.Name:
						continue
					}
					for seed := uint64(1); seed <= uint64(seeds); seed++ {
						var e *explore.Exploration
						t.Run(fmt.Sprintf("%s/%s/seed-%d", m.Name, w.Name, seed), func(t *testing.T) {
							if m.Name != "control" {
								tier.Full(t, "exploring a mutant: the zoo's mutants are caught on fake in TestZoo")
							}
							if w != c.worlds[0] {
								tier.Full(t, "the control in a world past the controller's first")
							}
							if c.name == "scaler" {
								tier.Full(t, "the scaler's baseline, which cmd/converge's TestExploreTheBaseline explores in the presubmit too")
							}
							// A mutant needs one finding; the control, every point.
							o := scenariotest.ExploreOptions{Seed: seed * 100, FirstFinding: m.Name != "control" && !*exploreAll}
							if *reportDir != "" {
								o.Dir = filepath.Join(*reportDir, "explore", c.name, m.Name, w.Name, fmt.Sprint(seed*100))
							}
							e = scenariotest.Explore(t, w, m.Controller(), o)
						})
						if e == nil {
							continue // filtered out by -run, or failed saying why
						}
						lines = append(lines, fmt.Sprintf("%s %s seed %d: %d points, %d run, %d findings in %v", m.Name, w.Name, seed*100,
							e.Coverage.Points, e.Coverage.Run, len(e.Findings), time.Duration(e.Wall).Round(time.Millisecond)))
						for _, f := range e.Findings {
							lines = append(lines, fmt.Sprintf("  %s (%d points; smallest %s %s): %s", f.Name(), len(f.Points),
								f.Smallest.Point.ID, f.Smallest.Point.Signature, text.FirstLine(f.Detail)))
						}
						if m.Name == "control" {
							assert.Empty(t, e.Findings, "false alarm on the correct %s in %s:\n%s", c.name, w.Name, e.Text())
						}
						if c.foundIn[m.Name] == w.Name {
							assert.NotEmpty(t, e.Findings, "%s: exploring %s found nothing", m.Name, w.Name)
						}
						found += len(e.Findings)
					}
				}
				if why, missed := c.missed[m.Name]; missed && *exploreAll {
					assert.Zero(t, found, "%s is found now (missed because %s): name its world in foundIn", m.Name, why)
				}
				if _, ok := c.foundIn[m.Name]; !ok && m.Name != "control" && c.missed[m.Name] == "" {
					t.Errorf("%s: say where exploration finds it (foundIn) or why it misses it (missed)", m.Name)
				}
			}
			t.Log("\n" + strings.Join(lines, "\n"))
		})
	}
}
