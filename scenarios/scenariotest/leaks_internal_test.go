package scenariotest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// priorityQueueLeak is controller-runtime v0.23.0's priority queue leak as
// a goroutine dump shows it, its module's version in the file paths.
func priorityQueueLeak(version string) goroutine {
	dir := "/root/go/pkg/mod/sigs.k8s.io/controller-runtime@" + version + "/pkg/controller/priorityqueue/"
	return goroutine{
		Header: "goroutine 6423 [chan send (durable), synctest bubble 18]:",
		State:  "chan send (durable)",
		Funcs: []string{
			"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems.func1.1",
			"github.com/google/btree.(*node[...]).iterate",
			"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems",
			"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.New[...]",
		},
		Files: []string{dir + "priorityqueue.go:400", "/root/go/pkg/mod/github.com/google/btree@v1.1.3/btree_generic.go:522", dir + "priorityqueue.go:408", dir + "priorityqueue.go:99"},
	}
}

func TestAKnownLibraryLeakIsNotTheControllers(t *testing.T) {
	waiting := goroutine{
		Header: "goroutine 6422 [sync.Mutex.Lock, synctest bubble 18]:",
		State:  "sync.Mutex.Lock",
		Funcs:  []string{"sync.(*Mutex).Lock", "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleAddBuffer", "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.New[...]"},
		Files:  []string{"/usr/local/go/src/sync/mutex.go:46", "/root/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.0/pkg/controller/priorityqueue/priorityqueue.go:300", "/root/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.0/pkg/controller/priorityqueue/priorityqueue.go:98"},
	}
	rest, notes := leakReport([]goroutine{priorityQueueLeak("v0.23.0"), waiting, priorityQueueLeak("v0.24.1")})
	assert.Empty(t, rest)
	if assert.Len(t, notes, 1, "one note per kind of leak") {
		assert.Contains(t, notes[0], "not judged: a goroutine of sigs.k8s.io/controller-runtime v0.23.0 outlived the run, a leak of that module fixed in v0.25.0")
	}

	// The same function in a version that has the fix is something else.
	rest, notes = leakReport([]goroutine{priorityQueueLeak("v0.25.2")})
	assert.Empty(t, notes)
	assert.Equal(t, []string{"chan send (durable) in sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems.func1.1 (priorityqueue.go:400), started by sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.New[...]"}, rest)

	// Beside the known one, the controller's own leak is still judged,
	// alike goroutines counted once.
	own := goroutine{State: "select (durable)", Funcs: []string{"example.com/op.(*r).loop", "example.com/op.Start"}, Files: []string{"/src/op/r.go:12", "/src/op/r.go:3"}}
	rest, notes = leakReport([]goroutine{priorityQueueLeak("v0.23.0"), own, own})
	assert.Len(t, notes, 1)
	assert.Equal(t, []string{"2 goroutines: select (durable) in example.com/op.(*r).loop (r.go:12), started by example.com/op.Start"}, rest)
}
