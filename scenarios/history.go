package scenarios

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// history records a run as it happens. It is the chaos plans' Recorder.
type history struct {
	mu     sync.Mutex
	h      reports.History
	broken map[string]bool // the checks History.Recorded has a finding of
	series map[seriesKey]int
	// seen is the world as the observer has seen it so far, for the goal
	// and the interfering actors.
	seen *check.Seen
	// lastWrite is the At of the controller's last successful write of
	// an object (successfulWrite).
	lastWrite time.Time
	// receipts dedupes History.Received.
	receipts map[reports.Receipt]bool

	// changes counts what happened that can move the goal: requests,
	// watch events, states, firings, log lines of the instances' life.
	// wake, buffered, hears of each (see touch).
	changes atomic.Uint64
	wake    chan struct{}
}

var _ chaos.Recorder = (*history)(nil)

func newHistory() *history {
	return &history{broken: map[string]bool{}, series: map[seriesKey]int{}, seen: check.NewSeen(nil), receipts: map[reports.Receipt]bool{}, wake: make(chan struct{}, 1),
		h: reports.History{Requests: []reports.Request{}, Events: []reports.WatchEvent{}, Faults: []chaos.Firing{},
			States: []reports.State{}, Samples: []reports.Sample{}, Log: []reports.Entry{}}}
}

// touch counts a change and wakes the goal's watcher if it sleeps.
func (h *history) touch() {
	h.changes.Add(1)
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Record keeps a fault's firing.
func (h *history) Record(f chaos.Firing) {
	h.mu.Lock()
	h.h.Faults = append(h.h.Faults, f)
	h.mu.Unlock()
	h.touch()
}

func (h *history) request(q reports.Request) {
	h.mu.Lock()
	h.h.Requests = append(h.h.Requests, q)
	if check.SuccessfulWrite(q) {
		h.lastWrite = q.At
	}
	h.mu.Unlock()
	h.touch()
}

// events is how many events the history holds: a request's Seen.
func (h *history) events() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.h.Events)
}

// gap records that the observer's watch of resource broke at at.
func (h *history) gap(resource string, at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := reports.Gap{At: at, Resource: resource}
	if err != nil {
		g.Error = err.Error()
	}
	h.h.Gaps = append(h.h.Gaps, g)
}

func (h *history) event(e reports.WatchEvent) {
	h.mu.Lock()
	h.h.Events = append(h.h.Events, e)
	h.seen.UpTo(h.h.Events, len(h.h.Events))
	h.mu.Unlock()
	h.touch()
}

// received is how many receipts the history holds: a request's Received.
func (h *history) received() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.h.Received)
}

// receive records that an instance received objects (or their
// deletions), each unless it had received that version of it before. A
// receipt without a UID says nothing about which object it was, and is
// dropped.
func (h *history) receive(rcs ...reports.Receipt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rc := range rcs {
		if rc.UID == "" || rc.Name == "" {
			continue
		}
		key := rc
		key.At = time.Time{}
		if h.receipts[key] {
			continue
		}
		h.receipts[key] = true
		h.h.Received = append(h.h.Received, rc)
	}
}

// watched records a kind the observer watches.
func (h *history) watched(resource string, gvk schema.GroupVersionKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.Resources == nil {
		h.h.Resources = map[string]string{}
	}
	h.h.Resources[resource] = gvk.GroupVersion().String() + " " + gvk.Kind
	h.seen.Watched(resource, gvk)
}

// selected are the objects sel matches as seen so far, by name.
func (h *history) selected(sel Selector) []*unstructured.Unstructured {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen.Selected(check.Selector{APIVersion: sel.APIVersion, Kind: sel.Kind, Name: sel.Name, Labels: sel.Labels})
}

// started records the start of instance idx of the controller named so
// ("" for the one under test).
func (h *history) started(idx int, controller string, at time.Time) {
	h.mu.Lock()
	h.h.Lives = append(h.h.Lives, reports.Life{Instance: idx, Controller: controller, Started: at})
	h.mu.Unlock()
}

// ended records that a fault ended an instance.
func (h *history) ended(idx int, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.h.Lives {
		if l := &h.h.Lives[i]; l.Instance == idx && l.Ended.IsZero() {
			l.Ended, l.Requests = at, len(h.h.Requests)
		}
	}
}

func (h *history) state(s reports.State) {
	h.mu.Lock()
	h.h.States = append(h.h.States, s)
	h.mu.Unlock()
	h.touch()
}

// sample keeps s if it differs from the last sample.
func (h *history) sample(s reports.Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.h.Samples); n > 0 {
		last := h.h.Samples[n-1]
		if last.QueueDepth == s.QueueDepth && last.Reconciles == s.Reconciles && last.Retries == s.Retries && last.CountsRetries == s.CountsRetries {
			return
		}
	}
	h.h.Samples = append(h.h.Samples, s)
}

func (h *history) log(at time.Time, what string) {
	h.note(at, what)
	h.touch()
}

// note is log for the goal's watcher: its own lines change nothing.
func (h *history) note(at time.Time, what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.h.Log = append(h.h.Log, reports.Entry{At: at, What: what})
}

// find records what the run found as it happened (History.Recorded): the
// first finding of a check; later ones of the same check only count in
// the log.
//
// It does not touch: the goal does not read findings, and a panic's
// handler calls it from whatever goroutine panicked, maybe in another
// run's synctest bubble, where a send on this run's wake channel is fatal.
func (h *history) find(f reports.Finding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.findLocked(f)
}

// violate is find for a judge's breach of an invariant, given as strings
// (View.Violate): object is the name of what it is about.
func (h *history) violate(invariant string, at time.Time, object, request, detail string) {
	f := check.Finding(invariant, at, reports.Subject{Name: object}, nil, detail)
	f.RequestText = request
	h.find(f)
}

// findLocked is find for a caller that holds h.mu.
func (h *history) findLocked(f reports.Finding) {
	if h.broken[f.Check] {
		return
	}
	h.broken[f.Check] = true
	h.h.Recorded = append(h.h.Recorded, f)
	h.h.Log = append(h.h.Log, reports.Entry{At: f.At, What: "invariant " + f.Check + " broken: " + f.Detail})
}
