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

// TestScenarios runs every scenario of the catalogue on every backend it
// supports, as scenario/backend/seed-N subtests, with the scaler each one
// configures (see scenariotest for the -converge.* flags).
func TestScenarios(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	scenariotest.RunScenarios(t, all, func(s *scenarios.Scenario) scenarios.Controller { return scaler.For(s) },
		scenariotest.Options{Parallel: true, SharedControlPlane: true})
}
