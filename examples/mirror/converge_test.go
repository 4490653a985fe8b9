package mirror_test

import (
	"testing"

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
