package fake

import (
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
)

// initialEventsEnd is the annotation of the bookmark that ends a
// watch-list's initial events.
const initialEventsEnd = "k8s.io/initial-events-end"

// watchOptions are the parts of metav1.ListOptions a watch honours.
type watchOptions struct {
	label             labels.Selector
	field             fields.Selector
	rv                string
	sendInitialEvents bool
	// copy: each event gets its own object, for clients that keep it (a
	// typed clientset's informers); the REST door encodes the shared one.
	copy bool
}

func parseWatchOptions(r *resource, o metav1.ListOptions) (watchOptions, error) {
	label, err := labels.Parse(o.LabelSelector)
	if err != nil {
		return watchOptions{}, apierrors.NewBadRequest(err.Error())
	}
	field, err := r.parseFieldSelector(o.FieldSelector)
	if err != nil {
		return watchOptions{}, err
	}
	wo := watchOptions{label: label, field: field, rv: o.ResourceVersion}
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		// As the API server validates a watch-list request.
		if o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			return watchOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
				fieldErrors("sendInitialEvents", "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan"))
		}
		if !o.AllowWatchBookmarks {
			return watchOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
				fieldErrors("allowWatchBookmarks", "allowWatchBookmarks must be true when sendInitialEvents is true"))
		}
		wo.sendInitialEvents = true
	} else if o.ResourceVersionMatch != "" {
		return watchOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
			fieldErrors("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
	}
	return wo, nil
}

// watch starts a watch the way an API server does: from the resourceVersion
// asked for (history replayed, 410 Expired when it is older than the kept
// history), or with the current objects as ADDED when none is given or
// initial events are asked for (then a bookmark marks their end); label
// and field selectors are applied, and an object that stops or starts
// matching is seen as DELETED or ADDED. Each watcher has an unbounded
// buffer, so a slow reader never blocks writers or loses events.
func (s *store) watch(r *resource, ns string, o watchOptions) (*watcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	w := newWatcher(s, r, ns, o)
	var from int64
	replay := false
	if o.rv != "" && o.rv != "0" {
		n, err := strconv.ParseInt(o.rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion " + strconv.Quote(o.rv))
		}
		if n > s.rv {
			return nil, apierrors.NewTimeoutError("Too large resource version: "+o.rv+", current: "+strconv.FormatInt(s.rv, 10), 1)
		}
		if !o.sendInitialEvents {
			if n < s.compacted {
				return nil, apierrors.NewResourceExpired("too old resource version: " + o.rv + " (" + strconv.FormatInt(s.compacted, 10) + ")")
			}
			from, replay = n, true
		}
	}
	if replay {
		for i := s.history.since(from); i < s.history.len(); i++ {
			w.offer(s.history.at(i))
		}
	} else {
		objs, _ := s.snapshot(r, ns, s.rv)
		keys := make([]objKey, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		sortKeys(keys)
		for _, k := range keys {
			w.offer(event{rv: s.rv, gvr: r.gvr, ns: k.ns, typ: watch.Added, obj: objs[k]})
		}
		if o.sendInitialEvents {
			w.push(watch.Event{Type: watch.Bookmark, Object: bookmark(r, s.rv, true)})
		}
	}
	s.watchers[w] = struct{}{}
	go w.pump()
	return w, nil
}

// bookmark is a BOOKMARK event's object: only the kind and the
// resourceVersion, and the annotation that ends a watch-list's initial
// events when end is set.
func bookmark(r *resource, rv int64, end bool) runtime.Object {
	obj := r.newObject(r.storage)
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rv, 10))
	if end {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	return obj
}

func (s *store) forget(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, w)
}

type watcher struct {
	s  *store
	r  *resource
	ns string
	o  watchOptions

	mu      sync.Mutex
	queue   []watch.Event
	wake    chan struct{} // one pending wake-up
	out     chan watch.Event
	stop    chan struct{}
	stopped sync.Once
	end     chan struct{} // closed by finish: end once the queue is delivered
	ended   sync.Once
}

func newWatcher(s *store, r *resource, ns string, o watchOptions) *watcher {
	return &watcher{
		s: s, r: r, ns: ns, o: o,
		wake: make(chan struct{}, 1), out: make(chan watch.Event), stop: make(chan struct{}), end: make(chan struct{}),
	}
}

// offer queues e if it concerns this watch, translated for its selectors.
func (w *watcher) offer(e event) {
	if e.gvr != w.r.gvr || (w.ns != "" && e.ns != w.ns) {
		return
	}
	now := w.r.matches(e.obj, w.o.label, w.o.field)
	before := e.prev != nil && w.r.matches(e.prev, w.o.label, w.o.field)
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
	obj := e.obj
	if w.o.copy {
		obj = obj.DeepCopyObject()
	}
	w.push(watch.Event{Type: typ, Object: obj})
}

func (w *watcher) push(e watch.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
			case <-w.end:
				return
			}
		}
		select {
		case w.out <- *next:
			w.mu.Lock()
			w.queue[0] = watch.Event{}
			w.queue = w.queue[1:]
			w.mu.Unlock()
		case <-w.stop:
			return
		}
	}
}

func (w *watcher) Stop() { w.stopped.Do(func() { close(w.stop) }) }

// finish ends the watch once what is queued has been delivered, as a
// server ends the watches of a resource it stops serving.
func (w *watcher) finish() { w.ended.Do(func() { close(w.end) }) }

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }
