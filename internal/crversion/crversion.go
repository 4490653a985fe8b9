// Package crversion says which controller-runtime a binary is built with,
// and what that version's priority queue can do.
package crversion

import (
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

const module = "sigs.k8s.io/controller-runtime"

// Version is the version of controller-runtime this binary was built with:
// from its build information, which a test binary lacks, or else from the
// file a function of it was compiled from, which names the module's
// version in the module cache (with -trimpath too); "" when neither says
// (a vendored or replaced copy).
var Version = sync.OnceValue(func() string {
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

// PriorityQueueFixed is the first controller-runtime whose priority queue
// lets a controller stop in process: before it, the queue's handler of
// ready items could hold the queue's lock while it waited for ever to hand
// an item to a worker that had already returned, and its other handlers
// then waited for that lock for ever. In a synctest bubble the lock's
// waiters also stop the clock.
const PriorityQueueFixed = "v0.25.0"

// PriorityQueueStops says whether a controller on the priority queue can
// stop in process with the controller-runtime this binary is built with:
// false before PriorityQueueFixed, true from it on or when the version is
// unknown.
func PriorityQueueStops() bool {
	v := Version()
	return !semver.IsValid(v) || semver.Compare(v, PriorityQueueFixed) >= 0
}
