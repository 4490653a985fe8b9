package controller_test

import (
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// watchFault sits between the fake tracker and an informer: it can swallow
// the DELETED event of named objects, hold events back, and end the current
// watch with a 410 Expired ERROR event, which makes the reflector relist.
// A swallowed delete followed by a relist is the tombstone a real informer
// sees after a missed delete.
type watchFault struct {
	mu      sync.Mutex
	drop    map[string]bool
	gate    chan struct{} // closed while events flow
	current *faultyWatch
	watches int
}

func (c *cluster) faultWatches(gvr schema.GroupVersionResource) *watchFault {
	f := &watchFault{drop: map[string]bool{}, gate: make(chan struct{})}
	close(f.gate)
	c.cs.PrependWatchReactor(gvr.Resource, func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		inner, err := c.cs.Tracker().Watch(gvr, action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		w := newFaultyWatch(inner, f.dropped, f.flowing)
		f.mu.Lock()
		f.current = w
		f.watches++
		f.mu.Unlock()
		return true, w, nil
	})
	return f
}

func (f *watchFault) dropDeleteOf(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop[name] = true
}

func (f *watchFault) dropped(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drop[name]
}

// hold stops delivering events until release; the tracker's watcher
// buffers them (up to 100).
func (f *watchFault) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
}

func (f *watchFault) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.gate)
}

func (f *watchFault) flowing() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gate
}

// expire ends the current watch with 410 Expired.
func (f *watchFault) expire() {
	f.mu.Lock()
	w := f.current
	f.mu.Unlock()
	status := apierrors.NewResourceExpired("too old resource version").Status()
	w.inject(watch.Event{Type: watch.Error, Object: &status})
}

func (f *watchFault) watchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watches
}

type faultyWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	injected chan watch.Event
	stop     chan struct{}
	once     sync.Once
}

func newFaultyWatch(inner watch.Interface, drop func(name string) bool, flowing func() <-chan struct{}) *faultyWatch {
	w := &faultyWatch{inner: inner, out: make(chan watch.Event), injected: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		defer inner.Stop()
		for {
			var ev watch.Event
			select {
			case <-w.stop:
				return
			case ev = <-w.injected:
			case e, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				ev = e
				if m, isMeta := e.Object.(metav1.Object); e.Type == watch.Deleted && isMeta && drop(m.GetName()) {
					continue
				}
			}
			select {
			case <-flowing():
			case <-w.stop:
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *faultyWatch) inject(ev watch.Event) {
	select {
	case w.injected <- ev:
	case <-w.stop:
	}
}

func (w *faultyWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *faultyWatch) ResultChan() <-chan watch.Event { return w.out }

// bufferWatches puts an unbounded buffer between the fake tracker and every
// watcher: the tracker's watchers hold 100 events and panic when full. The
// buffer moves that limit from the informer's processing speed to how soon
// the draining goroutine is scheduled; it does not remove it.
func (c *cluster) bufferWatches() {
	c.cs.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		inner, err := c.cs.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		return true, newBufferedWatch(inner), nil
	})
}

type bufferedWatch struct {
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newBufferedWatch(inner watch.Interface) *bufferedWatch {
	w := &bufferedWatch{out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		defer inner.Stop()
		in := inner.ResultChan()
		var queue []watch.Event
		for in != nil || len(queue) > 0 {
			var out chan watch.Event
			var next watch.Event
			if len(queue) > 0 {
				out, next = w.out, queue[0]
			}
			select {
			case e, ok := <-in:
				if !ok {
					in = nil
					continue
				}
				queue = append(queue, e)
			case out <- next:
				queue = queue[1:]
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *bufferedWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *bufferedWatch) ResultChan() <-chan watch.Event { return w.out }
