package mirror_test

import (
	"os"
	"testing"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestMain gives the tests the -converge.* flags, prepares the process for
// runs and stops the envtest control plane they share.
func TestMain(m *testing.M) { os.Exit(scenariotest.Main(m)) }

// TestScenarios runs the mirror controller through its scenarios, and
// each fault-free one under each of converge's fault profiles, on fake and
// on envtest, side by side; the profiles go on envtest for the first
// scenario only (every scenario with -converge.full or in make test-full).
// These are the presubmit tier's envtest runs of every fault profile.
func TestScenarios(t *testing.T) {
	scenariotest.Run(t, "scenarios", mirror.UnderTest{}, scenariotest.Options{
		Faults: true, FaultScenarios: []string{"mirror"}, Full: !testing.Short(),
	})
}
