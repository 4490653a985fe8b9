package scenariotest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
)

// counted is the fake kind, counting the backends it makes.
type counted struct {
	fake.Kind
	made *atomic.Int32
}

func (k counted) For(ctx context.Context, r sim.Run) (sim.Backend, error) {
	k.made.Add(1)
	return k.Kind.For(ctx, r)
}

// RunFake runs on the virtual kind it is given, not on a fake of its own.
func TestRunFakeKeepsTheKindItIsGiven(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	var made atomic.Int32
	res := scenariotest.RunFake(t, s, scenarios.Options{Backend: counted{made: &made}, Seed: 1, Controller: mirror.UnderTest{}})
	require.Empty(t, res.Error)
	assert.True(t, res.Pass, res.Reasons)
	assert.Equal(t, int32(1), made.Load(), "the run's backend came from the kind given")
}
