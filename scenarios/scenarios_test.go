package scenarios_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	fake.DropErrorBackoff()
	os.Exit(simtest.Main(m))
}

// onEnvtestInPresubmit are the catalogue's scenarios that make test (-short)
// runs on envtest as well as on fake: both control-plane faults, and one of
// each kind the examples' fault profiles (examples/mirror) and the chaos
// package's informer tests do not already run on envtest: a tombstone,
// latency beside 5xx, a graceful handover, and readiness beside
// kube-controller-manager's Deployment controller. make test-full runs
// every scenario on every backend it names.
var onEnvtestInPresubmit = []string{
	"apiserver-restart", "compaction-410s", "tombstone", "server-errors-and-latency",
	"graceful-handover", "half-unready", "baseline",
}

// TestScenarios runs every scenario of the catalogue on every backend it
// supports (on envtest, under -short, only onEnvtestInPresubmit), as
// scenario/backend/seed-N subtests side by side, with the scaler each one
// configures (see scenariotest for the -converge.* flags).
func TestScenarios(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	o := scenariotest.Options{SharedControlPlane: true, Full: !testing.Short()}
	if testing.Short() {
		o.EnvtestScenarios = onEnvtestInPresubmit
	}
	scenariotest.RunScenarios(t, all, func(s *scenarios.Scenario) scenarios.Controller { return scaler.For(s) }, o)
}
