// Package workqueues reads the client-go work queues of the process for the
// instance each belongs to: the inside of a plain client-go controller,
// without an adapter method.
//
// It is client-go's workqueue metrics provider (workqueue.SetProvider, in
// its init). client-go keeps the first provider set; Go initializes a
// program's packages in import-path order once their imports are, and
// this package imports nothing that controller-runtime's or
// component-base's providers do not, so it is set before theirs, which
// never are. A queue reports to the provider only when it has a name
// (TypedRateLimitingQueueConfig.Name): an unnamed queue reports nothing,
// to any provider.
//
// A queue belongs to the Tally of the goroutine that made it: the harness
// gives an instance's Tally to the goroutine that builds the instance and
// to the one that runs it (Within). A queue made elsewhere (in a goroutine
// the controller started) belongs to the only Tally open in the process,
// if there is one, and to none otherwise. Every queue counts in Totals.
package workqueues

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
)

func init() { workqueue.SetProvider(provider{}) }

// Tally is what the queues of one instance did.
type Tally struct {
	queues atomic.Int32 // metrics made for it: 4 per named queue
	counts
}

// counts are a queue's, a Tally's or the process's: adds, Gets (the depth
// gauge's decrements), Dones (work-duration observations) and retries
// (AddAfter, AddRateLimited).
type counts struct {
	adds, gets, dones, retries atomic.Int64
}

// Snapshot is a Tally's counts at one instant.
type Snapshot struct {
	// Queues: the instance made at least one named queue.
	Queues  bool
	Adds    int64
	Gets    int64
	Dones   int64
	Retries int64
}

// Depth is what is queued and not yet taken.
func (s Snapshot) Depth() int64 { return max(s.Adds-s.Gets, 0) }

// Busy: an item is taken and not done.
func (s Snapshot) Busy() bool { return s.Gets > s.Dones }

// Snapshot reads t.
func (t *Tally) Snapshot() Snapshot {
	s := t.counts.snapshot()
	s.Queues = t.queues.Load() > 0
	return s
}

func (c *counts) snapshot() Snapshot {
	return Snapshot{Adds: c.adds.Load(), Gets: c.gets.Load(), Dones: c.dones.Load(), Retries: c.retries.Load()}
}

var (
	mu    sync.Mutex
	owner = map[int64]*Tally{} // goroutine id: the Tally its queues belong to
	open  = map[*Tally]int{}   // Tallies given to a goroutine now, how many times
	total = map[string]*counts{}
)

// Within runs f with the queues the calling goroutine makes attributed to
// t, and t open meanwhile.
func Within(t *Tally, f func()) {
	id := goid()
	mu.Lock()
	prev := owner[id]
	owner[id] = t
	open[t]++
	mu.Unlock()
	defer func() {
		mu.Lock()
		if prev == nil {
			delete(owner, id)
		} else {
			owner[id] = prev
		}
		if open[t]--; open[t] == 0 {
			delete(open, t)
		}
		mu.Unlock()
	}()
	f()
}

// Totals are the counts of every queue of the process with one of names.
func Totals(names map[string]bool) Snapshot {
	mu.Lock()
	defer mu.Unlock()
	var s Snapshot
	for name, c := range total {
		if !names[name] {
			continue
		}
		n := c.snapshot()
		s.Queues = true
		s.Adds += n.Adds
		s.Gets += n.Gets
		s.Dones += n.Dones
		s.Retries += n.Retries
	}
	return s
}

// Reporting says whether a queue of the process has reported to this
// package's provider: then it is client-go's provider, and no queue
// reports to another one's registry.
func Reporting() bool {
	mu.Lock()
	defer mu.Unlock()
	return len(total) > 0
}

// tallyOf is the Tally of a queue made now, and the process's counts of
// queues named name.
func tallyOf(name string) (*Tally, *counts) {
	id := goid()
	mu.Lock()
	defer mu.Unlock()
	c := total[name]
	if c == nil {
		c = &counts{}
		total[name] = c
	}
	t := owner[id]
	if t == nil && len(open) == 1 {
		for only := range open {
			t = only
		}
	}
	if t != nil {
		t.queues.Add(1)
	}
	return t, c
}

// goid is the calling goroutine's id, from the first line of its stack
// ("goroutine 12 [running]:"). It is read when a queue is made, not per
// item.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}

// provider makes each metric of a queue count into the Tally of the
// goroutine that made the queue and into the process's totals.
type provider struct{}

var _ workqueue.MetricsProvider = provider{}

// metric counts one kind of call into a queue's Tally (when it has one)
// and its name's totals.
type metric struct {
	t    *Tally
	c    *counts
	kind func(*counts) *atomic.Int64
}

func (m metric) count(n int64) {
	if m.t != nil {
		m.kind(&m.t.counts).Add(n)
	}
	m.kind(m.c).Add(n)
}

func newMetric(name string, kind func(*counts) *atomic.Int64) metric {
	t, c := tallyOf(name)
	return metric{t: t, c: c, kind: kind}
}

func adds(c *counts) *atomic.Int64    { return &c.adds }
func gets(c *counts) *atomic.Int64    { return &c.gets }
func dones(c *counts) *atomic.Int64   { return &c.dones }
func retries(c *counts) *atomic.Int64 { return &c.retries }

// depth: the queue increments it on each add it keeps (counted as an add)
// and decrements it on each Get.
type depth struct{ m metric }

func (depth) Inc()        {}
func (d depth) Dec()      { d.m.count(1) }
func (depth) Set(float64) {}

type counter struct{ m metric }

func (c counter) Inc() { c.m.count(1) }

type observer struct{ m metric }

func (o observer) Observe(float64) { o.m.count(1) }

type none struct{}

func (none) Inc()            {}
func (none) Dec()            {}
func (none) Set(float64)     {}
func (none) Observe(float64) {}

func (provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return depth{newMetric(name, gets)}
}

func (provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return counter{newMetric(name, adds)}
}

func (provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return none{}
}

func (provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return observer{newMetric(name, dones)}
}

func (provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return none{}
}

func (provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return none{}
}

func (provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return counter{newMetric(name, retries)}
}
