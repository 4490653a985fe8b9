// Package catalogue holds the scenario tests that the CLI's tests give
// converge as --test-binary: the catalogue with the scaler, as the
// scenarios package's TestScenarios runs it. A test binary of its own
// builds from the packages go vet has already compiled; the scenarios
// package's own test binary would compile the scenarios package and four
// that import it again, with its internal tests.
package catalogue_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	scenarios.PrepareProcess()
	scenariotest.RegisterFlags()
	os.Exit(simtest.Main(m))
}

func TestScenarios(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	scenariotest.RunScenarios(t, all, func(s *scenarios.Scenario) scenarios.Controller { return scaler.For(s) },
		scenariotest.Options{SharedControlPlane: true, Full: !testing.Short()})
}
