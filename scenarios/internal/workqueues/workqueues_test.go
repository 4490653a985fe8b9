package workqueues_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/scenarios/internal/workqueues"

	// The two other providers a controller's test binary links, each set
	// in its package's init: converge's must still be the one client-go
	// keeps.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
	_ "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func named(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// A named queue made within a Tally counts its adds, takes, dones and
// retries there, with controller-runtime's and component-base's providers
// in the binary: converge's provider is the one client-go kept.
func TestANamedQueueCountsInItsTally(t *testing.T) {
	var tally workqueues.Tally
	var q workqueue.TypedRateLimitingInterface[string]
	workqueues.Within(&tally, func() { q = named("counted") })
	defer q.ShutDown()
	assert.True(t, tally.Snapshot().Queues)
	assert.True(t, workqueues.Reporting(), "a queue reports here: no other registry holds one")

	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: no add
	key, _ := q.Get()
	s := tally.Snapshot()
	assert.Equal(t, int64(2), s.Adds)
	assert.Equal(t, int64(1), s.Depth())
	assert.True(t, s.Busy())

	q.Add(key) // while it is worked on: queued again once done
	q.Done(key)
	s = tally.Snapshot()
	assert.False(t, s.Busy())
	assert.Equal(t, int64(1), s.Dones)
	assert.Equal(t, int64(2), s.Depth())

	q.AddRateLimited("c")
	assert.Equal(t, int64(1), tally.Snapshot().Retries)

	total := workqueues.Totals(map[string]bool{"counted": true})
	assert.Equal(t, tally.Snapshot().Adds, total.Adds)
	assert.Equal(t, workqueues.Snapshot{}, workqueues.Totals(map[string]bool{"other": true}))
}

// An unnamed queue reports to no provider: its Tally has no queue.
func TestAnUnnamedQueueIsNotSeen(t *testing.T) {
	var tally workqueues.Tally
	var q workqueue.TypedRateLimitingInterface[string]
	workqueues.Within(&tally, func() { q = named("") })
	defer q.ShutDown()
	q.Add("a")
	assert.Equal(t, workqueues.Snapshot{}, tally.Snapshot())
}

// A queue made in a goroutine no Tally was given belongs to the only
// Tally open, and to none when two are.
func TestAQueueOfAnotherGoroutine(t *testing.T) {
	elsewhere := func(name string) workqueue.TypedRateLimitingInterface[string] {
		made := make(chan workqueue.TypedRateLimitingInterface[string])
		go func() { made <- named(name) }()
		return <-made
	}
	var one, two workqueues.Tally
	workqueues.Within(&one, func() {
		q := elsewhere("alone")
		defer q.ShutDown()
		q.Add("a")
		assert.Equal(t, int64(1), one.Snapshot().Adds)

		done := make(chan struct{})
		go workqueues.Within(&two, func() {
			q := elsewhere("among-two")
			defer q.ShutDown()
			q.Add("a")
			close(done)
		})
		<-done
	})
	assert.Equal(t, int64(1), one.Snapshot().Adds)
	assert.False(t, two.Snapshot().Queues)
	assert.Equal(t, int64(1), workqueues.Totals(map[string]bool{"among-two": true}).Adds)
}
