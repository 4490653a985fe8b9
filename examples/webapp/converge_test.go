package webapp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestScenarios runs the operator through its scenarios, and the first of
// them under each of converge's fault profiles, on fake and on envtest
// (the bug zoo runs the others under the profiles, on fake). One run at a
// time: a controller-runtime manager is probed through the process's
// metrics.
func TestScenarios(t *testing.T) {
	c, err := webapp.UnderTest("")
	require.NoError(t, err)
	scenariotest.Run(t, "scenarios", c, scenariotest.Options{Faults: true, FaultScenarios: []string{"webapp"}})
}
