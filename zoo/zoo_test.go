package zoo_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/zoo"
)

var (
	seeds     = flag.Int("zoo.seeds", 1, "seeds per mutant and scenario (of the examples, the control only)")
	alarms    = flag.Int("zoo.alarms", 20, "seeds of the correct scaler on every scenario that caught a mutant (-short: 5 unless set)")
	reportDir = flag.String("zoo.report", "", "write the results, the table (zoo.md) and the HTML report here")
	only      = flag.String("zoo.mutants", "", "comma-separated mutants to run (default: all)")
	onEnvtest = flag.Bool("zoo.envtest", false, "also run each mutant on envtest, on the scenario that caught it soonest on fake (always in the full tier: without -short)")
)

func TestMain(m *testing.M) {
	scenarios.PrepareProcess()
	scenariotest.RegisterFlags() // -converge.seeds and the others
	os.Exit(simtest.Main(m))
}

// skipped are catalogue scenarios the zoo leaves out, and why.
var skipped = map[string]string{
	"scale-1000": "a thousand Deployments take seconds a run; no mutant needs them to be caught",
}

// TestZoo runs the control and every mutant against the fake catalogue,
// then the correct scaler over many seeds on every scenario that caught a
// mutant. It fails if the control fails anywhere, if a mutant escapes every
// scenario, or if the scaler raises a single false alarm.
//
// Runs go one at a time: a panic in a client-go goroutine is judged in
// every run active in the process (see scenarios), so overlapping runs
// would share it.
// firstCatchOnly: presubmit (-short, no -zoo.mutants) runs a mutant until
// a scenario catches it; the control runs everywhere, and the full tier
// (and the table in docs/zoo.md) runs every mutant everywhere.
func firstCatchOnly() bool { return testing.Short() && *only == "" }

func TestZoo(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	var catalogue []*scenarios.Scenario
	for _, s := range all {
		if s.RunsOn(fake.Name) && skipped[s.Name] == "" {
			catalogue = append(catalogue, s)
		}
	}
	mutants := append([]zoo.Mutant{zoo.Control()}, zoo.Mutants()...)
	if *only != "" {
		want := strings.Split(*only, ",")
		mutants = slices.DeleteFunc(mutants, func(m zoo.Mutant) bool { return m.Name != "control" && !slices.Contains(want, m.Name) })
	}
	table := zoo.NewTable(mutants)
	var results []*reports.Result
	began := time.Now()
	for i, m := range mutants {
		for _, s := range catalogue {
			if i > 0 && firstCatchOnly() && len(table.CaughtBy(m.Name)) > 0 {
				break
			}
			for seed := uint64(1); seed <= uint64(*seeds); seed++ {
				res := runFake(t, s, seed, m.Controller(), nil)
				table.Add(m.Name, res)
				results = append(results, res)
			}
		}
	}
	t.Logf("%d mutant runs in %v", len(results), time.Since(began).Round(time.Millisecond))

	if *onEnvtest || !testing.Short() {
		results = append(results, envtestRuns(t, table, mutants)...)
	}

	for _, s := range table.Scenarios {
		if c := table.Cell("control", s); c != nil && c.Caught > 0 {
			t.Errorf("the control (the kit with no bug) failed %s: %s: %s; that scenario cannot catch a mutant", s, c.Why, c.Reason)
		}
	}
	for _, m := range mutants[1:] {
		if len(table.CaughtBy(m.Name)) == 0 {
			t.Errorf("mutant %s (%s) escaped every scenario", m.Name, m.Bug)
		}
	}

	// No false alarms: the correct scaler on every scenario that caught
	// one; presubmit (-short) over fewer seeds, the full tier over all.
	began = time.Now()
	table.FalseAlarmSeeds = *alarms
	if testing.Short() && !flagSet("zoo.alarms") {
		table.FalseAlarmSeeds = 5
	}
	for _, name := range table.Catching() {
		s, err := scaler.Lookup(strings.TrimSuffix(name, "/"+fake.Name))
		require.NoError(t, err)
		for seed := uint64(1); seed <= uint64(table.FalseAlarmSeeds); seed++ {
			res := runFake(t, s, seed, scaler.Controller{}, nil)
			table.FalseAlarmRuns++
			if !res.Pass {
				table.FalseAlarms++
				results = append(results, res)
				t.Errorf("false alarm: the scaler failed %s, seed %d: %s", name, seed, strings.Join(res.Reasons, "; "))
			}
		}
	}
	t.Logf("false alarms: %d in %d runs of the scaler (%v)", table.FalseAlarms, table.FalseAlarmRuns, time.Since(began).Round(time.Millisecond))
	t.Log("\n" + table.Markdown())

	if *reportDir != "" {
		for _, r := range results {
			_, err := reports.Write(*reportDir, r)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(*reportDir, "zoo.md"), []byte(table.Markdown()), 0o644))
		section, err := table.HTML()
		require.NoError(t, err)
		index, err := reports.WriteHTML(*reportDir, results, section)
		require.NoError(t, err)
		t.Logf("report: %s", index)
	}
}

// runFake runs s with c in virtual time.
// runFake runs s with c on fake; a fault profile's run is also judged by
// live, when there is one (see scenariotest.Liveness).
func runFake(t *testing.T, s *scenarios.Scenario, seed uint64, c scenarios.Controller, live *scenariotest.Liveness) *reports.Result {
	t.Helper()
	replay := fmt.Sprintf("go test ./zoo -count=1 -run '^TestZoo$' -zoo.mutants=%s", c.Name())
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: c, Replay: replay})
	live.Judge(t, s, c, res)
	verdict := "pass"
	if !res.Pass {
		verdict = "FAIL " + firstReason(res)
	}
	t.Logf("%-18s %-26s seed %-3d %-6v %s", c.Name(), s.Name, seed, time.Duration(res.Wall).Round(time.Millisecond), verdict)
	return res
}

// flagSet says whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func firstReason(r *reports.Result) string {
	if len(r.Reasons) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(r.Reasons[0], "\n")
	return line
}

// envtestRuns runs each mutant on envtest (real time, a real API server) on
// the scenario that caught it soonest on fake, if that scenario runs there,
// and the control on the same scenarios.
func envtestRuns(t *testing.T, table *zoo.Table, mutants []zoo.Mutant) []*reports.Result {
	simtest.Require(t)
	var out []*reports.Result
	scenariosUsed := map[string]bool{}
	run := func(m zoo.Mutant, name string) {
		s, err := scaler.Lookup(name)
		require.NoError(t, err)
		if !s.RunsOn(envtest.Name) {
			return
		}
		scenariosUsed[name] = true
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: envtest.Kind{}, Seed: 1, Controller: m.Controller(),
			Replay: fmt.Sprintf("go test ./zoo -count=1 -run '^TestZoo$' -zoo.envtest -zoo.mutants=%s", m.Name)})
		verdict := "pass"
		if !res.Pass {
			verdict = "FAIL " + firstReason(res)
		}
		t.Logf("%-18s %-26s envtest %-8v %s", m.Name, s.Name, time.Duration(res.Wall).Round(time.Millisecond), verdict)
		table.Add(m.Name, res)
		out = append(out, res)
	}
	for _, m := range mutants[1:] {
		if first := table.Fastest(m.Name); first != nil {
			run(m, first.Scenario)
		}
	}
	for name := range scenariosUsed {
		run(mutants[0], name)
	}
	return out
}
