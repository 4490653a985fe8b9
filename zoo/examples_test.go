package zoo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/zoo"
)

// example is a controller of examples/ with its scenarios and mutants.
type example struct {
	name string
	// dir holds its scenarios; each fault-free one also runs under every
	// fault profile.
	dir     string
	mutants []zoo.Mutant // the control first
	// escapes are the mutants no scenario catches yet, and why.
	escapes map[string]string
}

func examples(t *testing.T) []example {
	t.Helper()
	control, err := webapp.UnderTest("")
	require.NoError(t, err)
	web := example{name: "webapp", dir: "../examples/webapp/scenarios",
		mutants: []zoo.Mutant{zoo.Of("control", "none: the operator as it should be", control)},
		escapes: map[string]string{
			// Input mutants: no scenario scales a WebApp down or changes
			// its port; input exploration does
			// (TestInputPointsFindTheExamplesInputMutants).
			string(webapp.ScaleUpOnly):  "no scenario scales a WebApp down; input exploration finds it",
			string(webapp.PortOnCreate): "no scenario changes a WebApp's port; input exploration finds it",
		}}
	for _, b := range webapp.Bugs() {
		c, err := webapp.UnderTest(b.Name)
		require.NoError(t, err)
		web.mutants = append(web.mutants, zoo.Of(string(b.Name), b.Description, c))
	}
	mir := example{name: "mirror", dir: "../examples/mirror/scenarios",
		mutants: []zoo.Mutant{zoo.Of("control", "none: the controller as it should be", mirror.UnderTest{})},
		escapes: map[string]string{
			// An input mutant: no scenario takes every target off a Mirror;
			// input exploration does.
			string(mirror.BugFirstTarget): "no scenario takes every target off a Mirror; input exploration finds it",
		}}
	for _, b := range mirror.Bugs() {
		mir.mutants = append(mir.mutants, zoo.Of(string(b.Name), b.Description, mirror.UnderTest{Bug: b.Name}))
	}
	return []example{web, mir}
}

// TestExamples runs each example controller and its mutants through the
// example's own scenarios, alone and under every fault profile, on fake:
// the control must pass every one, each mutant must fail at least one
// (what caught it goes into the table), and a mutant known to escape must
// still escape, so that the list of escapes stays true.
func TestExamples(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			base, err := scenarios.LoadDir(ex.dir)
			require.NoError(t, err)
			all, err := scenariotest.UnderFaults(base)
			require.NoError(t, err)
			table := zoo.NewTable(ex.mutants)
			var results []*reports.Result
			began := time.Now()
			for i, m := range ex.mutants {
				// The control (first) runs -zoo.seeds seeds: its false alarms.
				n := 1
				if i == 0 {
					n = *seeds
				}
				live := scenariotest.NewLiveness(1, nil)
				for _, s := range all {
					if !s.RunsOn(fake.Name) {
						continue
					}
					if i > 0 && firstCatchOnly() && len(table.CaughtBy(m.Name)) > 0 {
						break
					}
					for seed := range uint64(n) {
						res := runFake(t, s, seed+1, m.Controller(), live)
						require.Empty(t, res.Error, "%s could not be run", s.Name)
						table.Add(m.Name, res)
						results = append(results, res)
					}
				}
			}
			t.Logf("%d runs in %v", len(results), time.Since(began).Round(time.Millisecond))
			for _, s := range table.Scenarios {
				if c := table.Cell("control", s); c != nil && c.Caught > 0 {
					t.Errorf("the %s control failed %s: %s: %s", ex.name, s, c.Why, c.Reason)
				}
			}
			for _, m := range ex.mutants[1:] {
				caught := table.CaughtBy(m.Name)
				if why, ok := ex.escapes[m.Name]; ok {
					if len(caught) > 0 {
						t.Errorf("%s/%s is caught now (by %s): take it off the escapes", ex.name, m.Name, strings.Join(caught, ", "))
					}
					t.Logf("%s escapes: %s", m.Name, why)
					continue
				}
				if len(caught) == 0 {
					t.Errorf("mutant %s/%s (%s) escaped every scenario", ex.name, m.Name, m.Bug)
				}
			}
			t.Log("\n" + table.Markdown())
			if *reportDir != "" {
				dir := filepath.Join(*reportDir, ex.name)
				for _, r := range results {
					_, err := reports.Write(dir, r)
					require.NoError(t, err)
				}
				require.NoError(t, os.WriteFile(filepath.Join(*reportDir, "zoo-"+ex.name+".md"), []byte(table.Markdown()), 0o644))
				section, err := table.HTML()
				require.NoError(t, err)
				index, err := reports.WriteHTML(dir, results, section)
				require.NoError(t, err)
				t.Logf("report: %s", index)
			}
		})
	}
}
