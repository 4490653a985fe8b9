package bubble

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutsideABubbleThereIsNothingToWaitFor(t *testing.T) {
	assert.Zero(t, ID())
	assert.Nil(t, Others())
	assert.Nil(t, Linger(time.Hour))
}

// Linger waits, in virtual time, for what winds down within its grace.
func TestLingerWaitsForAWindDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		go func() { time.Sleep(45 * time.Second) }()
		assert.Empty(t, Linger(70*time.Second))
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, 45*time.Second)
		assert.Less(t, waited, 70*time.Second, "it stops looking once the goroutine ended")
	})
}

// What outlasts the grace is returned, named where it waits.
func TestLingerReturnsWhatOutlastsItsGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		go waitOn(never)
		start := time.Now()
		left := Linger(5 * time.Second)
		assert.Equal(t, 5*time.Second, time.Since(start))
		require.Len(t, left, 1)
		assert.Equal(t, "chan receive (durable)", left[0].State)
		assert.Contains(t, left[0].String(), "bubble.waitOn (bubble_test.go:")
		assert.Contains(t, left[0].String(), "started by github.com/converge-lab/converge/scenarios/internal/bubble.TestLingerReturnsWhatOutlastsItsGrace")
		close(never)
	})
}

func waitOn(c chan struct{}) { <-c }

// A goroutine waiting for a lock that a goroutine blocked for good holds
// keeps the bubble's clock still: Linger returns at once rather than
// sleep for ever.
func TestLingerDoesNotSleepOnAStoppedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		release := make(chan struct{})
		held := make(chan struct{})
		go func() {
			mu.Lock()
			close(held)
			<-release
			mu.Unlock()
		}()
		<-held
		//lint:ignore SA2001 the wait for the lock is the point
		go func() { mu.Lock(); mu.Unlock() }()
		// synctest.Wait would wait for ever for the lock's waiter: look
		// until it waits.
		for !slices.ContainsFunc(Others(), func(g Goroutine) bool { return g.State == "sync.Mutex.Lock" }) {
			runtime.Gosched()
		}
		start := time.Now()
		left := Linger(time.Minute)
		assert.True(t, Stuck(left), "%v", left)
		assert.Zero(t, time.Since(start))
		close(release)
	})
}

// A goroutine that waits a moment where synctest cannot tell it is
// blocked for good (here a channel of no bubble, which something sends on
// while Linger looks again) stops the clock only for that moment: Linger
// looks again before it gives up, and then waits for the wind-down.
func TestLingerLooksAgainBeforeItGivesUp(t *testing.T) {
	outside := make(chan struct{}) // of no bubble
	defer func(p func(time.Duration)) { wallPause = p }(wallPause)
	wallPause = func(d time.Duration) {
		select {
		case outside <- struct{}{}:
		default:
		}
		wallSleep(d)
	}
	synctest.Test(t, func(t *testing.T) {
		go func() {
			<-outside
			time.Sleep(10 * time.Second)
		}()
		for !slices.ContainsFunc(Others(), func(g Goroutine) bool { return g.State == "chan receive" }) {
			runtime.Gosched()
		}
		start := time.Now()
		assert.Empty(t, Linger(time.Minute))
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, 10*time.Second)
		assert.Less(t, waited, time.Minute, "it stops looking once the goroutine ended")
		select { // the goroutine is still waiting if Linger gave up on it
		case outside <- struct{}{}:
		default:
		}
	})
}

func TestStuck(t *testing.T) {
	durable := Goroutine{State: "chan receive (durable)"}
	lock := Goroutine{State: "sync.Mutex.Lock"}
	running := Goroutine{State: "runnable"}
	assert.False(t, Stuck(nil))
	assert.False(t, Stuck([]Goroutine{durable}), "a clock can move past a durable wait")
	assert.True(t, Stuck([]Goroutine{durable, lock}))
	assert.False(t, Stuck([]Goroutine{lock, running}), "the holder may be the one running")
	for _, state := range []string{"GC assist wait", "GC assist marking", "wait for GC cycle", "stopping the world", "GC weak to strong wait"} {
		assert.False(t, Stuck([]Goroutine{durable, lock, {State: state}}), "%s: it waits for the runtime, which goes on", state)
	}
}

// A dump's frames, elided ones and the created-by line read as functions
// and files.
func TestParse(t *testing.T) {
	dump := `goroutine 1 [running]:
main.main()
	/src/main.go:3 +0x1

goroutine 7 [select (durable), synctest bubble 3]:
example.com/op.(*r).loop(0x1)
	/src/op/r.go:12 +0x2
...additional frames elided...
created by example.com/op.Start in goroutine 6
	/src/op/r.go:3 +0x3

goroutine 8 [synctest.Run, synctest bubble 3]:
internal/synctest.Run(0x1)
	/go/src/runtime/synctest.go:1 +0x1

goroutine 9 [chan send, synctest bubble 4]:
example.com/other.f()
	/src/other.go:1 +0x1
`
	gs := parse(dump, 3)
	require.Len(t, gs, 1)
	g := gs[0]
	assert.Equal(t, "7", g.Number())
	assert.Equal(t, "select (durable)", g.State)
	assert.Equal(t, []string{"example.com/op.(*r).loop", "example.com/op.Start"}, g.Funcs)
	assert.Equal(t, []string{"/src/op/r.go:12", "/src/op/r.go:3"}, g.Files)
	assert.Equal(t, "select (durable) in example.com/op.(*r).loop (r.go:12), started by example.com/op.Start", g.String())
	assert.Equal(t, "7 select (durable) example.com/op.(*r).loop", g.Key())
}
