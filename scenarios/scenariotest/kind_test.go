package scenariotest_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/reports"
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

// leaky is the mirror controller with one goroutine per instance that
// never ends: blocked on a channel nobody sends on.
type leaky struct{ mirror.UnderTest }

func (l leaky) New(in scenarios.Instance) (scenarios.Runner, error) {
	never := make(chan struct{})
	go waitForever(never)
	return l.UnderTest.New(in)
}

func waitForever(c chan struct{}) { <-c }

// A goroutine of the controller that outlives the run is a clean-shutdown
// finding that says where it is blocked and who started it.
func TestALeakedGoroutineIsNamed(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: 1, Controller: leaky{}})
	require.Empty(t, res.Error)
	require.False(t, res.Pass)
	detail := cleanShutdown(res)
	assert.Contains(t, detail, "goroutines of the controller outlived the run")
	assert.Contains(t, detail, "chan receive (durable) in github.com/converge-lab/converge/scenarios/scenariotest_test.waitForever (kind_test.go:")
	assert.Contains(t, detail, "started by github.com/converge-lab/converge/scenarios/scenariotest_test.leaky.New")
	assert.Empty(t, res.Notes)
}

// slowToStop is the mirror controller leaving, as each instance stops, a
// goroutine that waits out a 45 s backoff before it looks at its context,
// as client-go's reflector does with a watch-list backoff (v0.35 to
// v0.37).
type slowToStop struct{ mirror.UnderTest }

type slowRunner struct{ scenarios.Runner }

func (s slowToStop) New(in scenarios.Instance) (scenarios.Runner, error) {
	r, err := s.UnderTest.New(in)
	return slowRunner{r}, err
}

func (r slowRunner) Run(ctx context.Context) error {
	err := r.Runner.Run(ctx)
	go func() { <-time.After(45 * time.Second) }()
	return err
}

// A goroutine that ends in virtual time after the instance returned is
// not a leak: it is given the time it would have had in real time. On a
// run called inside synctest.Test directly, the bubble ends rather than
// panics as deadlocked.
func TestAGoroutineWindingDownIsGivenItsTime(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: 1, Controller: slowToStop{}})
	require.Empty(t, res.Error)
	assert.True(t, res.Pass, res.Reasons)

	synctest.Test(t, func(t *testing.T) {
		res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: slowToStop{}})
	})
	assert.True(t, res.Pass, res.Reasons)
}

// locking is the mirror controller leaving, as it stops, a goroutine that
// holds a mutex while blocked for good and one waiting for that mutex: to
// synctest the second is not blocked for good, so the bubble would never
// end, nor its clock move (controller-runtime v0.23 and v0.24's priority
// queue does the same when a controller stops).

type locking struct {
	mirror.UnderTest
	first bool // as the instance starts, not as it stops
}

type lockingRunner struct {
	scenarios.Runner
	first bool
}

func (l locking) New(in scenarios.Instance) (scenarios.Runner, error) {
	r, err := l.UnderTest.New(in)
	return lockingRunner{r, l.first}, err
}

func (r lockingRunner) Run(ctx context.Context) error {
	if r.first {
		deadlock()
	}
	err := r.Runner.Run(ctx)
	deadlock()
	return err
}

func deadlock() {
	var mu sync.Mutex
	never := make(chan struct{})
	mu.Lock()
	go holdForever(&mu, never)
	go lockNow(&mu)
}

func holdForever(mu *sync.Mutex, never chan struct{}) {
	<-never
	mu.Unlock()
}

func lockNow(mu *sync.Mutex) {
	mu.Lock()
	//lint:ignore SA2001 waiting for the lock is the point
	mu.Unlock()
}

// A bubble kept from ending by a goroutine waiting for a mutex ends the
// run with a clean-shutdown finding that names both, and the test goes
// on.
func TestABubbleThatCannotEndIsALeakNotAHang(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: 1, Controller: locking{}})
	require.Empty(t, res.Error)
	require.False(t, res.Pass)
	detail := cleanShutdown(res)
	assert.Contains(t, detail, "goroutines of the controller outlived the run: 2 goroutines stayed blocked for 10s of wall time")
	assert.Contains(t, detail, "chan receive (durable) in github.com/converge-lab/converge/scenarios/scenariotest_test.holdForever")
	assert.Contains(t, detail, "sync.Mutex.Lock in ")
}

// The same as the instance starts stops the bubble's clock: the run ends
// as the harness's error, naming the goroutine that stops it, and the test
// goes on.
func TestARunWhoseClockCannotMoveIsAnError(t *testing.T) {
	s, err := scenarios.Load("../../examples/mirror/scenarios/mirror.yaml")
	require.NoError(t, err)
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: 1, Controller: locking{first: true}})
	assert.False(t, res.Pass)
	assert.Contains(t, res.Error, "the run stopped in virtual time: ")
	assert.Contains(t, res.Error, "stayed blocked for 10s of wall time")
	assert.Contains(t, res.Error, "sync.Mutex.Lock in ")
	assert.NotContains(t, res.Error, "holdForever", "only the goroutines that stop the clock are named")
}

// cleanShutdown is the detail of res's clean-shutdown finding, if any.
func cleanShutdown(res *reports.Result) string {
	for _, f := range res.Findings {
		if f.Check == scenarios.InvCleanShutdown {
			return f.Detail
		}
	}
	return ""
}
