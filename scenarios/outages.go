package scenarios

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/converge-lab/converge/sim"
)

// noted counts, per supervised control plane, the outages a run has
// already written into its history as ones before it began (a run during
// which one began fails with it, and the next run says how it ended).
var noted sync.Map // sim.Supervised -> int

// supervise watches the run's control plane: an outage of one of its
// components (an exit nothing asked for) ends the run at once as the
// harness's error, since the world it would judge was not running as a
// cluster's; outages since the last run on the plane, which the plane
// recovered from, go into the history. An outage seen since began (the
// instant before the backend made the run's namespace) is the run's own,
// even when it began before the watch did: the backend waits for a ready
// plane before it makes the namespace, not after. The function it returns
// stops the watch: call it before the backend stops, whose teardown is
// not judged.
func (r *run) supervise(ctx context.Context, sup sim.Supervised, since time.Time) (stop func()) {
	outages, next := sup.Outages()
	start := len(outages)
	for i, o := range outages {
		if !o.At.Before(since) {
			start = i
			break
		}
	}
	// The run's own are left for the next run to note.
	seen, _ := noted.Swap(sup, start)
	from, _ := seen.(int)
	for _, o := range outages[min(from, start):start] {
		r.hist.log(time.Now(), "before this run, the control plane's "+o.String())
	}
	check := func() {
		outages, _ := sup.Outages()
		if len(outages) > start {
			o := outages[start]
			r.fail(fmt.Errorf("no verdict: the world was not running as a cluster's does: the control plane's %s", o.Detail()))
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
			check()
			_, next = sup.Outages()
		}
	})
	return func() {
		cancel()
		wg.Wait()
		check()
	}
}
