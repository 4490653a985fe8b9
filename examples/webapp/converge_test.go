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
