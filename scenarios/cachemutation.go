package scenarios

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// caches watches what the controller's informers hold, to find a
// controller that modifies an object it got from one (no-cache-mutation):
// every reader of that cache then sees a state the server never had, and
// a write that fails leaves it there. Client-go's own detector panics the
// process; this one records a finding and keeps the run.
//
// An object is tracked with a deep copy taken once it is in a cache, and
// compared with it when the controller writes an object of the same name
// (in the writing goroutine, which is the one that modified it when the
// bug is a write built on the cached object) and, when it is exact, once
// more after every instance has stopped. It is tracked:
//   - through Instance.CacheTransform, which Manager sets as its cache's
//     last transform and a client-go controller passes to its informers
//     (informers.WithTransform, SetTransform);
//   - on the fake backend's typed client, as each watch event reaches an
//     informer's reflector, with a copy taken before. The informer's own
//     transform may still change the object in place (stripping managed
//     fields is common), and until the reflector has taken the next event
//     (a bookmark sent for that purpose) the object is its own, so such an
//     entry is read only after that, only when the controller writes, and
//     counts only changes that are not removals and that the write sent
//     as they are in the cache: a transform that adds a field the
//     controller then writes from a copy would be mistaken for the bug,
//     which CacheTransform avoids. A LIST's items reach the cache as
//     copies, so only what arrived by watch is tracked there.
type caches struct {
	r  *run
	mu sync.Mutex
	// byName holds the latest objects tracked per namespace/name; a key's
	// older ones were replaced in the cache and are no longer read.
	byName map[string][]*cached
	found  bool
}

type cached struct {
	obj, copy k8sruntime.Object
	instance  int
	at        time.Time
	// exact: copied as the cache stores it (CacheTransform); else copied
	// as the watch delivered it, before the informer's transform.
	exact bool
}

// keepPerName bounds the objects kept per name: the cache's current one
// and the one before it (a handler may still hold it), for each of a few
// informers.
const keepPerName = 4

// maxTrackedNames bounds the names tracked in a run, and so the copies it
// keeps: a run that churns through more objects than a scenario may create
// is not followed past them.
const maxTrackedNames = MaxObjects

func newCaches(r *run) *caches { return &caches{r: r, byName: map[string][]*cached{}} }

// track records obj as now in a cache of instance idx, with its copy
// (taken now when copy is nil).
func (c *caches) track(idx int, obj any, copy k8sruntime.Object) {
	o, ok := obj.(k8sruntime.Object)
	if !ok {
		return
	}
	m, err := meta.Accessor(o)
	if err != nil || m.GetName() == "" {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	e := &cached{obj: o, copy: copy, instance: idx, at: time.Now(), exact: copy == nil}
	if e.exact {
		e.copy = o.DeepCopyObject()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list, ok := c.byName[key]
	if !ok && len(c.byName) >= maxTrackedNames {
		return
	}
	if slices.ContainsFunc(list, func(x *cached) bool { return x.obj == o }) {
		// The transform saw what the watch delivered: its copy is exact.
		return
	}
	list = append(list, e)
	if len(list) > keepPerName {
		list = list[len(list)-keepPerName:]
	}
	c.byName[key] = list
}

// transform is Instance.CacheTransform for instance idx.
func (c *caches) transform(idx int) cache.TransformFunc {
	return func(obj any) (any, error) {
		c.track(idx, obj, nil)
		return obj, nil
	}
}

// wrote compares what instance idx's caches hold under the name it has
// just written.
func (c *caches) wrote(idx int, q reports.Request) {
	if q.Name == "" {
		return
	}
	c.mu.Lock()
	list := slices.Clone(c.byName[q.Namespace+"/"+q.Name])
	c.mu.Unlock()
	for _, e := range list {
		if e.instance == idx && c.compare(e, &q) {
			return
		}
	}
}

// sweep compares everything still tracked; call it once no instance runs.
func (c *caches) sweep() {
	c.mu.Lock()
	var all []*cached
	for _, list := range c.byName {
		all = append(all, list...)
	}
	c.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, e := range all {
		if e.exact && c.compare(e, nil) {
			return
		}
	}
}

// compare records a finding when e's object no longer equals its copy, and
// reports whether one has been recorded (only the first counts).
func (c *caches) compare(e *cached, q *reports.Request) bool {
	if c.done() {
		return true
	}
	changes := e.changes()
	if !e.exact {
		changes = sentAsCached(changes, e.copy, q)
	}
	if len(changes) == 0 {
		return false
	}
	return c.report(e, changes, q)
}

func (c *caches) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.found
}

// changes lists what differs between e's object and its copy.
func (e *cached) changes() []change {
	if reflect.DeepEqual(e.obj, e.copy) {
		return nil
	}
	now, was, err := toMaps(e.obj, e.copy)
	if err != nil {
		return nil
	}
	changes := fieldChanges("", was, now, nil)
	return changes
}

// sentAsCached keeps the changes to a cached object (was its copy) that are
// not removals and that q's body sent as they are: what the write shows
// was built on the cached object.
func sentAsCached(changes []change, was k8sruntime.Object, q *reports.Request) []change {
	if q == nil || q.Body == nil || q.Body.Object == nil {
		return nil
	}
	w, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(was)
	if err != nil {
		return nil
	}
	sent := map[string]any{}
	for _, ch := range fieldChanges("", w, q.Body.Object, nil) {
		if ch.HasNow {
			sent[ch.Path] = ch.Now
		}
	}
	var kept []change
	for _, ch := range changes {
		if v, ok := sent[ch.Path]; ok && ch.HasNow && reflect.DeepEqual(v, ch.Now) {
			kept = append(kept, ch)
		}
	}
	return kept
}

// report records a finding of e's changes and reports whether one has been
// recorded (only the first counts).
func (c *caches) report(e *cached, changes []change, q *reports.Request) bool {
	c.mu.Lock()
	if c.found {
		c.mu.Unlock()
		return true
	}
	c.found = true
	c.mu.Unlock()
	m, _ := meta.Accessor(e.obj)
	kind := reflect.TypeOf(e.obj).Elem().Name()
	if u, ok := e.obj.(interface{ GetKind() string }); ok && u.GetKind() != "" {
		kind = u.GetKind()
	}
	shown := changes
	if len(shown) > 3 {
		shown = shown[:3]
	}
	var parts []string
	for _, ch := range shown {
		parts = append(parts, ch.String())
	}
	detail := fmt.Sprintf("instance %d modified the %s %s/%s (resourceVersion %s) in its informer's cache: %s",
		e.instance, kind, m.GetNamespace(), m.GetName(), m.GetResourceVersion(), strings.Join(parts, "; "))
	if len(changes) > len(shown) {
		detail += fmt.Sprintf("; %d more", len(changes)-len(shown))
	}
	at := time.Now()
	if q != nil {
		at = q.At
		detail += fmt.Sprintf(". Seen as it sent %s %s %s: the write was built on the cached object, not a copy", q.Verb, q.Resource, q.Name)
	} else {
		detail += ". Seen after the run"
	}
	c.r.hist.find(check.Finding(InvNoCacheMutation, at, reports.Subject{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, q, detail))
	return true
}

func toMaps(now, was k8sruntime.Object) (map[string]any, map[string]any, error) {
	a, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(now)
	if err != nil {
		return nil, nil, err
	}
	b, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(was)
	if err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// change is one field that differs: Was absent or Now absent for a field
// added or removed.
type change struct {
	Path           string
	Was, Now       any
	HadWas, HasNow bool
}

func (ch change) String() string {
	switch {
	case !ch.HadWas:
		return fmt.Sprintf("%s set to %s", ch.Path, short(ch.Now))
	case !ch.HasNow:
		return fmt.Sprintf("%s removed (was %s)", ch.Path, short(ch.Was))
	default:
		return fmt.Sprintf("%s changed from %s to %s", ch.Path, short(ch.Was), short(ch.Now))
	}
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// fieldChanges lists the leaves that differ between was and now, in path
// order.
func fieldChanges(path string, was, now map[string]any, out []change) []change {
	keys := make(map[string]any, len(was)+len(now))
	maps.Copy(keys, was)
	maps.Copy(keys, now)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		w, hadW := was[k]
		n, hasN := now[k]
		wm, wOK := w.(map[string]any)
		nm, nOK := n.(map[string]any)
		switch {
		case wOK && nOK, wOK && !hasN, nOK && !hadW:
			out = fieldChanges(p, wm, nm, out)
		case !hadW || isEmpty(w):
			if hasN && !isEmpty(n) {
				out = append(out, change{Path: p, Now: n, HasNow: true})
			}
		case !hasN || isEmpty(n):
			out = append(out, change{Path: p, Was: w, HadWas: true})
		case !reflect.DeepEqual(w, n):
			out = append(out, change{Path: p, Was: w, Now: n, HadWas: true, HasNow: true})
		}
	}
	return out
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// trackWatch wraps a watch a reflector opened on the fake typed client, so
// each object it delivers is tracked, and recorded as received by instance
// idx of the controller named so (an object of resource); other watches pass as they are.
func (c *caches) trackWatch(idx int, controller, resource string, w watch.Interface) watch.Interface {
	if !fromReflector() {
		return w
	}
	out := make(chan watch.Event)
	tw := &trackedWatch{Interface: w, out: out, stop: make(chan struct{})}
	send := func(ev watch.Event) bool {
		select {
		case out <- ev:
			return true
		case <-tw.stop:
			return false
		}
	}
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			var copy, b k8sruntime.Object
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				if b = bookmark(ev.Object); b != nil {
					copy = ev.Object.DeepCopyObject()
				}
			}
			if !send(ev) {
				return
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				c.r.receivedEvent(idx, controller, resource, string(ev.Type), objectMeta{m.GetNamespace(), m.GetName(), string(m.GetUID()), m.GetResourceVersion()})
			}
			if b == nil {
				continue
			}
			// The channel is unbuffered: once the reflector takes the
			// bookmark it is done with ev's object.
			if !send(watch.Event{Type: watch.Bookmark, Object: b}) {
				return
			}
			c.track(idx, ev.Object, copy)
		}
	}()
	return tw
}

// bookmark is a bookmark at obj's resourceVersion, of obj's type, or nil
// when obj has none: the reflector takes it without a change.
func bookmark(obj k8sruntime.Object) k8sruntime.Object {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() == "" {
		return nil
	}
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return nil
	}
	b, ok := reflect.New(t.Elem()).Interface().(k8sruntime.Object)
	if !ok {
		return nil
	}
	bm, err := meta.Accessor(b)
	if err != nil {
		return nil
	}
	bm.SetResourceVersion(m.GetResourceVersion())
	b.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return b
}

type trackedWatch struct {
	watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *trackedWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.Interface.Stop()
}

// fromReflector reports whether the caller is a client-go reflector: a
// watch the controller opened itself holds objects it owns.
func fromReflector() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "k8s.io/client-go/tools/cache.(*Reflector)") {
			return true
		}
		if !more {
			return false
		}
	}
}
