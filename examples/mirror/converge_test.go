package mirror_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestScenarios runs the mirror controller through its scenario, alone and
// under each of converge's fault profiles, on fake and on envtest.
func TestScenarios(t *testing.T) {
	scenariotest.Run(t, "scenarios", mirror.UnderTest{}, scenariotest.Options{
		// The profiles run on fake: each is seconds there, and a minute or
		// more in real time.
		Faults: true, FaultBackends: []string{scenarios.Fake},
	})
}

// escapes are the bugs no scenario catches yet, and why.
var escapes = map[mirror.Bug]string{
	mirror.BugStaleStatus: "its status claims Synced while a target write fails, but it retries the failure, so the end state is right; " +
		"only an invariant across objects (a Mirror's status against its targets' data) sees the lie, and invariants read one object",
}

// TestBugsAreCaught runs every bug through the same scenarios, on fake:
// each must fail at least one, and says what caught it; a bug known to
// escape must still escape, so that this list stays true.
func TestBugsAreCaught(t *testing.T) {
	base, err := scenarios.LoadDir("scenarios")
	require.NoError(t, err)
	all, err := scenariotest.UnderFaults(base)
	require.NoError(t, err)
	for _, bug := range mirror.Bugs() {
		t.Run(string(bug.Name), func(t *testing.T) {
			caught := scenariotest.Catches(t, all, mirror.UnderTest{Bug: bug.Name})
			if why, ok := escapes[bug.Name]; ok {
				require.Empty(t, caught, "%s is caught now: take it off the escapes", bug.Name)
				t.Logf("%s escapes: %s", bug.Name, why)
				return
			}
			require.NotEmpty(t, caught, "%s (%s) escaped every scenario", bug.Name, bug.Description)
			t.Logf("%s caught by %d of %d scenarios; first: %s", bug.Name, len(caught), len(all), caught[0])
		})
	}
}
