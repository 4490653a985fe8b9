package zoo_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// inputMutants are the mutants input exploration finds, from the world
// given, and the finding that names each: its oracle, kind and field.
var inputMutants = []struct {
	example, world, bug string
	finding             string
}{
	{"webapp", "../examples/webapp/scenarios/webapp.yaml", string(webapp.ScaleUpOnly), "consistency Deployment spec.replicas"},
	{"webapp", "../examples/webapp/scenarios/webapp.yaml", string(webapp.PortOnCreate), "recovery Service spec.ports[*].port"},
	{"mirror", "../examples/mirror/scenarios/mirror.yaml", string(mirror.BugRemovedTargetsKept), "consistency ConfigMap (exists)"},
	{"mirror", "../examples/mirror/scenarios/mirror.yaml", string(mirror.BugFirstTarget), "verdict invariant no-panic"},
}

// underTest is the example's controller with bug ("" for the correct one).
func underTest(t *testing.T, example, bug string) scenarios.Controller {
	t.Helper()
	switch example {
	case "webapp":
		c, err := webapp.UnderTest(webapp.Bug(bug))
		require.NoError(t, err)
		return c
	case "mirror":
		return mirror.UnderTest{Bug: mirror.Bug(bug)}
	}
	t.Fatalf("no example %s", example)
	return nil
}

// TestExploreInputs explores the inputs of the examples' scenarios: each
// correct controller over 3 seeds without a finding, chains of changes
// included, each input mutant found with the field it mishandles named,
// shrunk to a point of one change.
// Presubmit runs the control's first seed.
func TestExploreInputs(t *testing.T) {
	for _, ex := range []struct{ name, world string }{
		{"webapp", "../examples/webapp/scenarios/webapp.yaml"},
		{"mirror", "../examples/mirror/scenarios/mirror.yaml"},
	} {
		s, err := scenarios.Load(ex.world)
		require.NoError(t, err)
		control := underTest(t, ex.name, "")
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/control/seed-%d", ex.name, seed), func(t *testing.T) {
				if seed > 1 {
					tier.Full(t, "the control's input exploration past its first seed (scenarios/explore judges every point of one in presubmit)")
				}
				o := scenariotest.ExploreOptions{Seed: seed * 100, Inputs: true}
				if testing.Short() {
					o.InputRules.Chains = 4 // of as many as the single changes in the full tier
				}
				e := scenariotest.Explore(t, s, control, o)
				require.NotNil(t, e)
				assert.Positive(t, e.Coverage.Inputs)
				assert.Equal(t, e.Coverage.Inputs, e.Coverage.Run)
				assert.Zero(t, e.Coverage.Errors, "every point's runs were carried out, each refused change refused:\n%s", e.Text())
				assert.Empty(t, e.Findings, "false alarm on the correct %s:\n%s", ex.name, e.Text())
				t.Logf("%d input points in %v", e.Coverage.Inputs, time.Duration(e.Wall).Round(time.Millisecond))
			})
		}
	}
	for _, m := range inputMutants {
		t.Run(m.example+"/"+m.bug, func(t *testing.T) {
			tier.Full(t, "exploring a mutant's inputs: scenarios/explore's TestInputPointsFindTheExamplesInputMutants finds them in presubmit")
			s, err := scenarios.Load(m.world)
			require.NoError(t, err)
			e := scenariotest.Explore(t, s, underTest(t, m.example, m.bug), scenariotest.ExploreOptions{Seed: 100, Inputs: true})
			require.NotNil(t, e)
			i := slices.IndexFunc(e.Findings, func(f explore.Finding) bool { return f.Name() == m.finding })
			require.GreaterOrEqual(t, i, 0, "no finding %q:\n%s", m.finding, e.Text())
			f := e.Findings[i]
			assert.Equal(t, explore.Input, f.Smallest.Point.Class)
			assert.Equal(t, 1, f.Smallest.Point.Size, "shrunk to one change: %s", f.Smallest.Point.Signature)
			t.Logf("%s: %s (%s)", m.bug, f.Detail, f.Smallest.Point.Signature)
		})
	}
}
