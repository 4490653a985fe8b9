package scenarios_test

import (
	"context"
	"flag"
	"fmt"
	"math"
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
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

var (
	seeds      = flag.Int("scenarios.seeds", 1, "seeds per scenario and backend (1..N)")
	firstSeed  = flag.Uint64("scenarios.seed", 1, "the first seed")
	reportDir  = flag.String("scenarios.report", "", "write every result into this folder (failing runs are always written)")
	names      = flag.String("scenarios.names", "", "comma-separated catalogue scenarios to run (default: all, unless files are given)")
	backends   = flag.String("scenarios.backends", "fake,envtest", "backends to run on (-short: fake only)")
	runID      = flag.String("scenarios.run-id", "", "recorded in every result: the invocation that asked for the run")
	runTimeout = flag.Duration("scenarios.run-timeout", 15*time.Minute, "wall-clock limit of one run")
	files      fileList
)

func init() {
	flag.Var(&files, "scenarios.file", "a scenario file to run (repeat for more)")
}

// fileList is a repeated flag: paths are taken whole, commas and all.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, " ") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func TestMain(m *testing.M) {
	fake.DropErrorBackoff()
	os.Exit(simtest.Main(m))
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
					if *seeds < 1 || *firstSeed > math.MaxUint64-uint64(*seeds-1) {
						t.Fatalf("-scenarios.seed=%d -scenarios.seeds=%d: the seeds must fit in 0..%d", *firstSeed, *seeds, uint64(math.MaxUint64))
					}
					for i := range uint64(*seeds) {
						seed := *firstSeed + i
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

// fromFile maps a scenario loaded from a file to that file, for its replay
// command.
var fromFile = map[*scenarios.Scenario]string{}

func loadScenarios(t *testing.T) []*scenarios.Scenario {
	t.Helper()
	if len(files) == 0 && *names == "" {
		all, err := scaler.Catalogue()
		require.NoError(t, err)
		return all
	}
	var out []*scenarios.Scenario
	seen := map[string]string{}
	add := func(s *scenarios.Scenario, from string) {
		if other, dup := seen[s.Name]; dup {
			t.Fatalf("two scenarios named %q (%s and %s): their results would overwrite each other", s.Name, other, from)
		}
		seen[s.Name] = from
		out = append(out, s)
	}
	for _, n := range strings.Split(*names, ",") {
		if n == "" {
			continue
		}
		s, err := scaler.Lookup(n)
		require.NoError(t, err)
		add(s, "the catalogue")
	}
	for _, f := range files {
		s, err := scenarios.Load(f)
		require.NoError(t, err)
		fromFile[s] = f
		add(s, f)
	}
	return out
}

// runOne runs s once: on fake inside a synctest bubble (virtual time, and
// the bubble fails the test if a goroutine outlives the run), elsewhere in
// real time. It writes the result where asked, and always when it failed.
func runOne(t *testing.T, s *scenarios.Scenario, backend string, seed uint64) *reports.Result {
	t.Helper()
	limit, stop := scenarios.WallClockLimit(*runTimeout) // outside the bubble: real time
	defer stop()
	opts := scenarios.Options{Backend: backend, Seed: seed, Replay: replay(s, backend, seed), RunID: *runID, Limit: limit, Controller: scaler.For(s)}
	var res *reports.Result
	switch backend {
	case scenarios.Fake:
		began := time.Now()
		synctest.Test(t, func(t *testing.T) { res = scenarios.Run(t.Context(), s, opts) })
		res.Wall = reports.Duration(time.Since(began)) // the bubble's clock is virtual
	case scenarios.Envtest:
		simtest.Require(t)
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
	cmd := fmt.Sprintf("go test ./scenarios -count=1 -run '^TestScenarios$/^%s$/^%s$/^seed-%d$' -scenarios.seed=%d -scenarios.backends=%s", s.Name, backend, seed, seed, backend)
	if f, ok := fromFile[s]; ok {
		cmd += " -scenarios.file=" + shellQuote(f)
	} else {
		cmd += " -scenarios.names=" + s.Name
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	return s.ObjectCount() >= 100
}
