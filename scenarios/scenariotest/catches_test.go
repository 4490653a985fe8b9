package scenariotest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// Catches names the scenario that failed a controller with a bug, and what
// failed it, and nothing for the correct controller.
func TestCatches(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	list := []*scenarios.Scenario{s}
	assert.Empty(t, scenariotest.Catches(t, list, mirror.UnderTest{}))
	caught := scenariotest.Catches(t, list, mirror.UnderTest{Bug: mirror.BugOrphanTargets})
	require.Len(t, caught, 1)
	assert.Equal(t, "mirror", caught[0].Scenario)
	assert.Contains(t, caught[0].Checks(), "targets-are-owned")
	assert.Regexp(t, `^mirror: invariant targets-are-owned broken at `, caught[0].String())
	for _, f := range caught[0].Findings {
		assert.True(t, f.Fails(), "%+v", f)
		assert.Contains(t, caught[0].String(), f.Sentence(caught[0].Result.Started), "every finding is named, not only the first")
	}
}
