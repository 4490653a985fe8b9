package scenarios

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/sim/fake"
)

// PrepareProcess readies the process for runs; Run refuses to start
// before it. Call it once, from TestMain (scenariotest's functions call it
// for you; more calls do nothing). It changes what apimachinery keeps for
// the whole process:
//
//   - utilruntime.ErrorHandlers become one handler that only logs
//     (fake.DropErrorBackoff). The default one rate-limits by sleeping
//     from the real time of the process's start, which inside a synctest
//     bubble (whose clock starts in 2000) is a sleep of decades of virtual
//     time: a reflector whose LIST failed never returns, and the run's
//     informers never stop.
//   - utilruntime.ReallyCrash is false, and a panic handler is added: a
//     controller's panic in a goroutine the harness did not start (an
//     informer's event handler, run by client-go under HandleCrash) is
//     recovered and breaks no-panic in every run then active, rather than
//     ending the process, harness and other runs' verdicts included. Runs
//     that overlap in one process share the attribution, so a caller that
//     needs it per run (the bug zoo) runs them one at a time.
func PrepareProcess() { prepare() }

var (
	prepared atomic.Bool
	prepare  = sync.OnceFunc(func() {
		fake.DropErrorBackoff()
		panics.active = map[*history]bool{}
		utilruntime.ReallyCrash = false
		utilruntime.PanicHandlers = append(utilruntime.PanicHandlers, func(_ context.Context, p any) {
			stack := string(debug.Stack())
			panics.mu.Lock()
			defer panics.mu.Unlock()
			for h := range panics.active {
				h.find(check.Finding(InvNoPanic, time.Now(), reports.Subject{}, nil, fmt.Sprintf("a controller goroutine panicked: %v\n%s", p, stack)))
			}
		})
		prepared.Store(true)
	})
)

var panics struct {
	mu     sync.Mutex
	active map[*history]bool
}

// watchPanics makes h receive the panics of client-go goroutines until
// the returned func is called.
func watchPanics(h *history) (stop func()) {
	panics.mu.Lock()
	panics.active[h] = true
	panics.mu.Unlock()
	return func() {
		panics.mu.Lock()
		delete(panics.active, h)
		panics.mu.Unlock()
	}
}
