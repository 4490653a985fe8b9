package scenarios

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

// history records a run as it happens. It is the chaos plans' Recorder.
type history struct {
	mu       sync.Mutex
	h        reports.History
	findings []reports.Finding // the first of each check, as found
	broken   map[string]bool
	writes   map[string]int // successful writes of the controller per object (resource/name)
	series   map[seriesKey]int

	// changes counts what happened that can move the goal: requests,
	// watch events, states, firings, log lines of the instances' life.
	// wake, buffered, hears of each (see touch).
	changes atomic.Uint64
	wake    chan struct{}
}

var _ chaos.Recorder = (*history)(nil)

func newHistory() *history {
	return &history{broken: map[string]bool{}, writes: map[string]int{}, series: map[seriesKey]int{}, wake: make(chan struct{}, 1),
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
	h.mu.Unlock()
	h.touch()
}

func (h *history) wrote(deployment string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes[deployment]++
}

func (h *history) event(e reports.WatchEvent) {
	h.mu.Lock()
	h.h.Events = append(h.h.Events, e)
	h.mu.Unlock()
	h.touch()
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
		if last.QueueDepth == s.QueueDepth && last.Reconciles == s.Reconciles && last.Retries == s.Retries {
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

// find records the first finding of a check; later ones of the same check
// only count in the log.
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
	f := finding(invariant, at, reports.Subject{Name: object}, nil, detail)
	f.RequestText = request
	h.find(f)
}

// findLocked is find for a caller that holds h.mu.
func (h *history) findLocked(f reports.Finding) {
	if h.broken[f.Check] {
		return
	}
	h.broken[f.Check] = true
	h.findings = append(h.findings, f)
	h.h.Log = append(h.h.Log, reports.Entry{At: f.At, What: "invariant " + f.Check + " broken: " + f.Detail})
}
