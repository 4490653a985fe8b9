package scenarios

import (
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/mod/semver"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// controllerRuntime is the version of controller-runtime this binary was
// built with: from its build information, which a test binary lacks, or
// else from the file a function of it was compiled from, which names the
// module's version in the module cache (with -trimpath too); "" when
// neither says (a vendored or replaced copy).
var controllerRuntime = sync.OnceValue(func() string {
	const module = "sigs.k8s.io/controller-runtime"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module && d.Replace == nil {
				return d.Version
			}
		}
	}
	pc := reflect.ValueOf(manager.New).Pointer()
	if fn := runtime.FuncForPC(pc); fn != nil {
		file, _ := fn.FileLine(pc)
		if m := moduleVersion.FindStringSubmatch(file); m != nil {
			return m[1]
		}
	}
	return ""
})

var moduleVersion = regexp.MustCompile(`sigs\.k8s\.io/controller-runtime@(v[^/]+)/`)

// priorityQueueFixed is the first controller-runtime whose priority queue
// lets a controller stop in process: before it, the queue's handler of
// ready items could hold the queue's lock while it waited for ever to hand
// an item to a worker that had already returned, and its other handlers
// then waited for that lock for ever. A run stops and starts controllers
// in process at every crash, SIGTERM and failover, and in virtual time
// the lock's waiters also stop the clock.
const priorityQueueFixed = "v0.25.0"

// priorityQueueOff says whether a Manager's controllers run without the
// priority queue when its options leave that unset: with a
// controller-runtime before priorityQueueFixed.
func priorityQueueOff() bool {
	v := controllerRuntime()
	return semver.IsValid(v) && semver.Compare(v, priorityQueueFixed) < 0
}

var sayPriorityQueue sync.Once

func logPriorityQueueOff() {
	sayPriorityQueue.Do(func() {
		klog.Background().Info("controller-runtime " + controllerRuntime() + "'s priority queue can deadlock when a controller stops in process (fixed in " + priorityQueueFixed + "); the managers' controllers run with UsePriorityQueue false (set it in Manager.Options to choose)")
	})
}
