package webapp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestScenarios runs the operator through its scenarios, and the
// fault-free ones under each of converge's fault profiles, on fake and on
// envtest.
func TestScenarios(t *testing.T) {
	c, err := webapp.UnderTest("")
	require.NoError(t, err)
	scenariotest.Run(t, "scenarios", c, scenariotest.Options{
		// The profiles run on fake: each is seconds there, and a minute or
		// more in real time.
		Faults: true, FaultBackends: []string{scenarios.Fake},
	})
}

// escapes are the bugs no scenario catches yet, and why.
var escapes = map[webapp.Bug]string{
	webapp.FinalizerEarly: "its children carry owner references, so the garbage collector removes them once the WebApp is gone: " +
		"the end state is right, and only the order (WebApp gone before its children) shows the bug, which invariants of one object cannot see",
	webapp.StaleStatus: "it reports Available for a generation before the Deployment runs that generation's config; " +
		"seeing that takes an invariant across the WebApp and its Deployment",
}

// TestBugsAreCaught runs every bug through the same scenarios, on fake:
// each must fail at least one, and says what caught it; a bug known to
// escape must still escape, so that the list stays true.
func TestBugsAreCaught(t *testing.T) {
	base, err := scenarios.LoadDir("scenarios")
	require.NoError(t, err)
	all, err := scenariotest.UnderFaults(base)
	require.NoError(t, err)
	for _, bug := range webapp.Bugs() {
		t.Run(string(bug.Name), func(t *testing.T) {
			c, err := webapp.UnderTest(bug.Name)
			require.NoError(t, err)
			caught := scenariotest.Catches(t, all, c)
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
