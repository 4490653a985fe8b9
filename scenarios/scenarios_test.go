package scenarios_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
)

var (
	seeds     = flag.Int("scenarios.seeds", 1, "seeds per scenario and backend (1..N)")
	firstSeed = flag.Uint64("scenarios.seed", 1, "the first seed")
	reportDir = flag.String("scenarios.report", "", "write every result into this folder (failing runs are always written)")
	files     = flag.String("scenarios.files", "", "comma-separated scenario files to run")
	names     = flag.String("scenarios.names", "", "comma-separated catalogue scenarios to run (default: all, unless files are given)")
	backends  = flag.String("scenarios.backends", "fake,envtest", "backends to run on (-short: fake only)")
)

func TestMain(m *testing.M) {
	fake.DropErrorBackoff()
	os.Exit(envtest.Main(m))
}

// TestScenarios runs every scenario of the catalogue on every backend it
// supports, as scenario/backend/seed-N subtests.
func TestScenarios(t *testing.T) {
	all := loadScenarios(t)
	for _, s := range all {
		t.Run(s.Name, func(t *testing.T) {
			// Runs share nothing but the envtest control plane, where each
			// has its own namespace; one that needs it to itself runs
			// alone, before the others.
			if !runsAlone(s) {
				t.Parallel()
			}
			for _, backend := range strings.Split(*backends, ",") {
				if !s.RunsOn(backend) || (testing.Short() && backend != scenarios.Fake) {
					continue
				}
				t.Run(backend, func(t *testing.T) {
					for seed := *firstSeed; seed < *firstSeed+uint64(*seeds); seed++ {
						t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
							res := runOne(t, s, backend, seed)
							if !res.Pass {
								why := slices.Concat(res.Reasons, res.Notes)
								t.Errorf("%s on %s, seed %d, failed:\n  %s\nreplay: %s", s.Name, backend, seed, strings.Join(why, "\n  "), res.Replay)
							}
							// A fault that never fired makes the scenario
							// prove nothing about it.
							if len(res.Unfired) > 0 {
								t.Errorf("%s on %s, seed %d: never fired: %s\nreplay: %s", s.Name, backend, seed, strings.Join(res.Unfired, ", "), res.Replay)
							}
						})
					}
				})
			}
		})
	}
}

func loadScenarios(t *testing.T) []*scenarios.Scenario {
	t.Helper()
	if *files == "" && *names == "" {
		all, err := scenarios.Catalogue()
		require.NoError(t, err)
		return all
	}
	var out []*scenarios.Scenario
	for _, n := range strings.Split(*names, ",") {
		if n == "" {
			continue
		}
		s, err := scenarios.Lookup(n)
		require.NoError(t, err)
		out = append(out, s)
	}
	for _, f := range strings.Split(*files, ",") {
		if f == "" {
			continue
		}
		s, err := scenarios.Load(f)
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// runOne runs s once: on fake inside a synctest bubble (virtual time, and
// the bubble fails the test if a goroutine outlives the run), elsewhere in
// real time. It writes the result where asked, and always when it failed.
func runOne(t *testing.T, s *scenarios.Scenario, backend string, seed uint64) *reports.Result {
	t.Helper()
	opts := scenarios.Options{Backend: backend, Seed: seed, Replay: replay(s, backend, seed)}
	var res *reports.Result
	switch backend {
	case scenarios.Fake:
		began := time.Now()
		synctest.Test(t, func(t *testing.T) { res = scenarios.Run(t.Context(), s, opts) })
		res.Wall = reports.Duration(time.Since(began)) // the bubble's clock is virtual
	case scenarios.Envtest:
		envtest.Require(t)
		res = scenarios.Run(context.Background(), s, opts)
	default:
		t.Skipf("backend %s is run by the converge CLI", backend)
	}
	dir := *reportDir
	if dir == "" && !res.Pass {
		dir = filepath.Join(os.TempDir(), "converge-results")
	}
	if dir != "" {
		path, err := reports.Write(dir, res)
		require.NoError(t, err)
		t.Logf("result: %s (simulated %v, wall %v)", path, res.Simulated, res.Wall)
	}
	return res
}

func replay(s *scenarios.Scenario, backend string, seed uint64) string {
	cmd := fmt.Sprintf("go test ./scenarios -count=1 -run '^TestScenarios$/^%s$/^%s$/^seed-%d$' -scenarios.seed=%d", s.Name, backend, seed, seed)
	if *files != "" && !isCatalogued(s.Name) {
		cmd += " -scenarios.files=" + *files
	}
	return cmd
}

func isCatalogued(name string) bool {
	_, err := scenarios.Lookup(name)
	return err == nil
}

// runsAlone says whether s needs the shared control plane to itself: it
// restarts the API server, or its workload keeps kube-controller-manager busy
// enough to delay the pods of the runs beside it (beside scale-200, by up to
// 40 s, which broke slow-readiness's budget).
func runsAlone(s *scenarios.Scenario) bool {
	if !s.RunsOn(scenarios.Envtest) {
		return false
	}
	for _, f := range s.Faults {
		if f.Fault == "apiserver-restart" {
			return true
		}
	}
	return s.Workload.Deployments >= 100
}
