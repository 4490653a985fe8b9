package scenarios

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/converge-lab/converge/reports"
)

// A controller's panic in a goroutine the harness did not start (an
// informer's event handler, run by client-go under HandleCrash) would end
// the whole process, harness included. While runs are active, such a panic
// is recovered by client-go and judged instead: it breaks no-panic in every
// active run. Runs in one process that overlap share the attribution, so a
// caller that needs it per run (the bug zoo) runs them one at a time.

var panics struct {
	once   sync.Once
	mu     sync.Mutex
	active map[*history]bool
}

// watchPanics makes h receive the panics of client-go goroutines until
// the returned func is called.
func watchPanics(h *history) (stop func()) {
	panics.once.Do(func() {
		panics.active = map[*history]bool{}
		utilruntime.ReallyCrash = false
		utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, func(_ context.Context, p any) {
			stack := string(debug.Stack())
			panics.mu.Lock()
			defer panics.mu.Unlock()
			for h := range panics.active {
				h.find(finding(InvNoPanic, time.Now(), reports.Subject{}, nil, fmt.Sprintf("a controller goroutine panicked: %v\n%s", p, stack)))
			}
		})
	})
	panics.mu.Lock()
	panics.active[h] = true
	panics.mu.Unlock()
	return func() {
		panics.mu.Lock()
		delete(panics.active, h)
		panics.mu.Unlock()
	}
}
