package fake

import (
	"sort"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// watch starts a watch the way an API server does: from the resourceVersion
// asked for (history replayed, 410 Expired when it is older than the kept
// history), or with the current objects as ADDED when none is given; label
// and field selectors are applied, and an object that stops or starts
// matching is seen as DELETED or ADDED. Each watcher has an unbounded
// buffer, so a slow reader never blocks writers or loses events.
func (s *server) watch(action k8stesting.Action) (bool, watch.Interface, error) {
	var opts metav1.ListOptions
	if a, ok := action.(k8stesting.WatchActionImpl); ok {
		opts = a.ListOptions
	}
	gvr, ns := action.GetResource(), action.GetNamespace()
	label, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	field, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true, nil, apierrors.NewServiceUnavailable("the fake backend is stopped")
	}
	w := newWatcher(s, gvr, ns, label, field)
	switch rv := opts.ResourceVersion; rv {
	case "", "0":
		list, err := s.tracker.List(gvr, gvr.GroupVersion().WithKind(""), ns)
		if err != nil {
			return true, nil, err
		}
		items, _ := meta.ExtractList(list)
		for _, item := range items {
			w.offer(event{rv: s.rv, gvr: gvr, ns: ns, typ: watch.Added, obj: item})
		}
	default:
		from, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			return true, nil, apierrors.NewBadRequest("invalid resourceVersion " + strconv.Quote(rv))
		}
		if from < s.compacted {
			return true, nil, apierrors.NewResourceExpired("too old resource version: " + rv + " (" + strconv.FormatInt(s.compacted, 10) + ")")
		}
		kept := s.kept()
		first := sort.Search(len(kept), func(i int) bool { return kept[i].rv > from })
		for _, e := range kept[first:] {
			w.offer(e)
		}
	}
	s.watchers[w] = struct{}{}
	go w.pump()
	return true, w, nil
}

// emit records a write and offers it to every watcher. Callers hold s.mu.
func (s *server) emit(gvr schema.GroupVersionResource, ns string, typ watch.EventType, obj, prev runtime.Object) {
	e := event{rv: s.rv, gvr: gvr, ns: ns, typ: typ, obj: obj.DeepCopyObject()}
	if prev != nil {
		e.prev = prev.DeepCopyObject()
	}
	s.history = append(s.history, e)
	if over := len(s.history) - s.head - s.limit; over > 0 {
		s.compacted = s.history[s.head+over-1].rv
		clear(s.history[s.head : s.head+over]) // let the objects go
		s.head += over
		// The trimmed events are dropped once they are as many as the kept
		// ones: each write costs O(1) on average, not a copy of the history.
		if s.head >= max(s.limit, 1) {
			s.history = append(make([]event, 0, 2*s.limit+1), s.history[s.head:]...)
			s.head = 0
		}
	}
	for w := range s.watchers {
		w.offer(e)
	}
}

// compact forgets the history: a watch from any resourceVersion before now
// gets 410 Expired, as after an etcd compaction.
func (s *server) compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rv
	s.history, s.head = nil, 0
}

// kept is the history a watch can resume from, oldest first. Callers hold
// s.mu.
func (s *server) kept() []event { return s.history[s.head:] }

func (s *server) forget(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, w)
}

// stop ends every watch and refuses further requests.
func (s *server) stop() {
	s.mu.Lock()
	s.closed = true
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

type watcher struct {
	s     *server
	gvr   schema.GroupVersionResource
	ns    string
	label labels.Selector
	field fields.Selector

	mu      sync.Mutex
	queue   []watch.Event
	wake    chan struct{} // one pending wake-up
	out     chan watch.Event
	stop    chan struct{}
	stopped sync.Once
}

func newWatcher(s *server, gvr schema.GroupVersionResource, ns string, label labels.Selector, field fields.Selector) *watcher {
	return &watcher{
		s: s, gvr: gvr, ns: ns, label: label, field: field,
		wake: make(chan struct{}, 1), out: make(chan watch.Event), stop: make(chan struct{}),
	}
}

// offer queues e if it concerns this watch, translated for its selectors.
func (w *watcher) offer(e event) {
	if e.gvr != w.gvr || (w.ns != "" && e.ns != w.ns) {
		return
	}
	now := w.matches(e.obj)
	before := e.prev != nil && w.matches(e.prev)
	typ := e.typ
	switch {
	case e.typ == watch.Modified && now && !before:
		typ = watch.Added
	case e.typ == watch.Modified && !now && before:
		typ = watch.Deleted
	case e.typ == watch.Deleted && !before && !now:
		return
	case e.typ != watch.Deleted && !now:
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, watch.Event{Type: typ, Object: e.obj.DeepCopyObject()})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !w.label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if w.field.Empty() {
		return true
	}
	return w.field.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// pump moves queued events to the result channel until Stop.
func (w *watcher) pump() {
	defer close(w.out)
	defer w.s.forget(w)
	for {
		w.mu.Lock()
		var next *watch.Event
		if len(w.queue) > 0 {
			next = &w.queue[0]
		}
		w.mu.Unlock()
		if next == nil {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		select {
		case w.out <- *next:
			w.mu.Lock()
			w.queue = w.queue[1:]
			w.mu.Unlock()
		case <-w.stop:
			return
		}
	}
}

func (w *watcher) Stop()                          { w.stopped.Do(func() { close(w.stop) }) }
func (w *watcher) ResultChan() <-chan watch.Event { return w.out }
