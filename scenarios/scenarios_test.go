package scenarios_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// unprepared, set in the environment, leaves the process unprepared, for
// TestRunRefusesAnUnpreparedProcess's child.
const unprepared = "CONVERGE_TEST_UNPREPARED"

func TestMain(m *testing.M) {
	if os.Getenv(unprepared) == "" {
		scenarios.PrepareProcess()
	}
	scenariotest.RegisterFlags() // -converge.seeds and the others
	os.Exit(simtest.Main(m))
}

// A run in a process nobody prepared changes none of apimachinery's
// process-wide handlers: it is refused, saying what to call.
func TestRunRefusesAnUnpreparedProcess(t *testing.T) {
	if os.Getenv(unprepared) != "" {
		s, err := scaler.Lookup("baseline")
		require.NoError(t, err)
		handlers := len(utilruntime.PanicHandlers)
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Controller: scaler.Controller{}})
		require.False(t, res.Pass)
		require.Contains(t, res.Error, "call scenarios.PrepareProcess() once, from TestMain")
		require.Len(t, utilruntime.PanicHandlers, handlers, "no panic handler was added")
		require.True(t, utilruntime.ReallyCrash, "ReallyCrash is as apimachinery left it")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunRefusesAnUnpreparedProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), unprepared+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestRunRefusesAnUnpreparedProcess")
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
		all = slices.DeleteFunc(all, func(s *scenarios.Scenario) bool { return fullTierOnly[s.Name] != "" })
	}
	scenariotest.RunScenarios(t, all, func(s *scenarios.Scenario) scenarios.Controller { return scaler.For(s) }, o)
}

// fullTierOnly are the catalogue's scenarios that make test (-short)
// leaves to make test-full, each with why: TestScenarios runs them there.
var fullTierOnly = map[string]string{
	"scale-1000": "a thousand Deployments under the race detector, two minutes of a core",
}

// TestTheFullTierOnlyScenariosExist: each name fullTierOnly leaves out is
// one of the catalogue's, so that the presubmit leaves out nothing else.
func TestTheFullTierOnlyScenariosExist(t *testing.T) {
	for name, why := range fullTierOnly {
		_, err := scaler.Lookup(name)
		require.NoError(t, err, "%s (%s)", name, why)
		t.Logf("%s runs in make test-full only: %s", name, why)
	}
}
