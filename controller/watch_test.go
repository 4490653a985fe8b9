package controller_test

import (
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// podWatchFault sits between the fake tracker and the pod informer: it can
// swallow the DELETED event of named pods and end the current watch with a
// 410 Expired ERROR event, which makes the reflector relist. Together they
// produce the tombstone a real informer sees after a missed delete.
type podWatchFault struct {
	mu      sync.Mutex
	drop    map[string]bool
	current *faultyWatch
	watches int
}

func (c *cluster) faultPodWatches() *podWatchFault {
	f := &podWatchFault{drop: map[string]bool{}}
	c.cs.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		inner, err := c.cs.Tracker().Watch(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		w := newFaultyWatch(inner, f.dropped)
		f.mu.Lock()
		f.current = w
		f.watches++
		f.mu.Unlock()
		return true, w, nil
	})
	return f
}

func (f *podWatchFault) dropDeleteOf(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop[name] = true
}

func (f *podWatchFault) dropped(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drop[name]
}

// expire ends the current watch with 410 Expired.
func (f *podWatchFault) expire() {
	f.mu.Lock()
	w := f.current
	f.mu.Unlock()
	status := apierrors.NewResourceExpired("too old resource version").Status()
	w.inject(watch.Event{Type: watch.Error, Object: &status})
}

func (f *podWatchFault) watchCount() int {
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

func newFaultyWatch(inner watch.Interface, drop func(name string) bool) *faultyWatch {
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
