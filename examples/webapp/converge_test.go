package webapp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestScenarios runs the operator through its scenarios, on fake and on
// envtest, and each fault-free one under each of converge's fault
// profiles on fake; the profiles go on envtest for the first scenario in
// make test-full (examples/mirror runs every profile on envtest in
// presubmit). One run at a time: a controller-runtime manager is probed
// through the process's metrics (scenarios.OneAtATime).
func TestScenarios(t *testing.T) {
	c, err := webapp.UnderTest("")
	require.NoError(t, err)
	o := scenariotest.Options{Faults: true}
	if !testing.Short() {
		o.FaultScenarios = []string{"webapp"}
	}
	scenariotest.Run(t, "scenarios", c, o)
}
