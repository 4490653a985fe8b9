package zoo_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// inputMutants are the mutants input exploration finds, from the world
// given, and the finding that names each: its oracle, kind and field.
var inputMutants = []struct {
	controller, world string
	bug               webapp.Bug
	finding           string
}{
	{"webapp", "webapp", webapp.ScaleUpOnly, "consistency Deployment spec.replicas"},
	{"webapp", "webapp", webapp.PortOnCreate, "consistency Service spec.ports[*].port"},
}

// TestExploreInputs explores the inputs of the webapp's scenario: the
// correct operator over 3 seeds without a finding, each input mutant
// found with the field it mishandles named, by a point of one change.
// Presubmit runs the control's first seed.
func TestExploreInputs(t *testing.T) {
	s, err := scenarios.Load("../examples/webapp/scenarios/webapp.yaml")
	require.NoError(t, err)
	control, err := webapp.UnderTest("")
	require.NoError(t, err)
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("control/seed-%d", seed), func(t *testing.T) {
			if seed > 1 {
				tier.Full(t, "the control's input exploration past its first seed (scenarios/explore judges every point of one in presubmit)")
			}
			e := scenariotest.Explore(t, s, control, scenariotest.ExploreOptions{Seed: seed * 100, Inputs: true})
			require.NotNil(t, e)
			assert.Positive(t, e.Coverage.Inputs)
			assert.Equal(t, e.Coverage.Inputs, e.Coverage.Run)
			assert.Empty(t, e.Findings, "false alarm on the correct webapp:\n%s", e.Text())
			t.Logf("%d input points in %v", e.Coverage.Inputs, time.Duration(e.Wall).Round(time.Millisecond))
		})
	}
	for _, m := range inputMutants {
		t.Run(string(m.bug), func(t *testing.T) {
			tier.Full(t, "exploring a mutant's inputs: scenarios/explore's TestInputPointsFindTheWebAppsInputMutants finds them in presubmit")
			c, err := webapp.UnderTest(m.bug)
			require.NoError(t, err)
			e := scenariotest.Explore(t, s, c, scenariotest.ExploreOptions{Seed: 100, Inputs: true})
			require.NotNil(t, e)
			i := slices.IndexFunc(e.Findings, func(f explore.Finding) bool { return f.Name() == m.finding })
			require.GreaterOrEqual(t, i, 0, "no finding %q:\n%s", m.finding, e.Text())
			f := e.Findings[i]
			assert.Equal(t, explore.Input, f.Smallest.Point.Class)
			t.Logf("%s: %s (%s)", m.bug, f.Detail, f.Smallest.Point.Signature)
		})
	}
}
