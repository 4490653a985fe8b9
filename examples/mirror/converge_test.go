package mirror_test

import (
	"testing"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestScenarios runs the mirror controller through its scenarios, and the
// first of them under each of converge's fault profiles, on fake and on
// envtest, side by side (the bug zoo runs the others under the profiles,
// on fake).
func TestScenarios(t *testing.T) {
	scenariotest.Run(t, "scenarios", mirror.UnderTest{}, scenariotest.Options{
		Faults: true, FaultScenarios: []string{"mirror"}, Parallel: true,
	})
}
