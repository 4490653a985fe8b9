package chaos

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// InstallFake applies the plan to a fake clientset (its embedded Fake):
// request faults as a reactor ahead of its chain, watch faults as a proxy
// around the watches its chain returns. It refuses a plan holding a fault
// that is not Available on the Clientset layer.
//
// Limits: a reactor runs under the clientset's lock, so Latency there
// serialises every call of that clientset (use one clientset per
// controller, as the fake backend's clients are); a watch proxy that delays
// events holds the ones behind them in the source watcher, which must buffer
// them (the fake backend's watchers do, without bound).
func (inj *Injector) InstallFake(f *k8stesting.Fake) error {
	var errs []error
	for _, in := range inj.plan.Injections {
		if err := in.Fault.Available(Clientset); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.Fault.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chaos: not injectable into a fake clientset: %w", err)
	}
	f.Lock()
	defer f.Unlock()
	// One reactor in front of the chain it was given, which it runs itself,
	// so it can act after a request too (a Crash). Install it last.
	reactions := f.ReactionChain
	f.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, runtime.Object, error) { return inj.react(a, reactions) }}}
	chain := f.WatchReactionChain
	f.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*",
		Reaction: func(action k8stesting.Action) (bool, watch.Interface, error) { return inj.reactWatch(action, chain) }}}
	return nil
}

// fakeRequest classifies a fake clientset action like ParseRequest does an
// HTTP request.
func fakeRequest(a k8stesting.Action) Request {
	gvr := a.GetResource()
	r := Request{Verb: a.GetVerb(), Group: gvr.Group, Resource: gvr.Resource, Subresource: a.GetSubresource(), Namespace: a.GetNamespace()}
	if r.Verb == "delete-collection" {
		r.Verb = "deletecollection"
	}
	switch act := a.(type) {
	case interface{ GetName() string }: // get, patch, delete
		r.Name = act.GetName()
	case k8stesting.UpdateAction:
		if m, err := meta.Accessor(act.GetObject()); err == nil {
			r.Name = m.GetName()
		}
	}
	return r
}

func (inj *Injector) react(a k8stesting.Action, chain []k8stesting.Reactor) (bool, runtime.Object, error) {
	if inj.Crashed() {
		return true, nil, refused("in-process")
	}
	r := fakeRequest(a)
	if err := inj.requestFaults(r); err != nil {
		return true, nil, err
	}
	if past, at := inj.staleList(a, r); at > 0 {
		handled, obj, err := runChain(past, chain)
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			inj.staleServed(r, at, nil)
			if handled && err == nil {
				inj.after(r)
			}
			inj.met(r, handled, obj, err)
			return handled, obj, err
		}
		inj.staleServed(r, at, err)
	}
	handled, obj, err := runChain(a, chain)
	if handled && err == nil {
		inj.after(r)
	}
	inj.met(r, handled, obj, err)
	return handled, obj, err
}

func runChain(a k8stesting.Action, chain []k8stesting.Reactor) (bool, runtime.Object, error) {
	for _, reactor := range chain {
		if !reactor.Handles(a) {
			continue
		}
		if handled, obj, err := reactor.React(a); handled {
			return true, obj, err
		}
	}
	return false, nil, nil
}

// staleList is the list a to serve from a stale view instead, and the
// resourceVersion it is served at (zero when none applies).
func (inj *Injector) staleList(a k8stesting.Action, r Request) (k8stesting.Action, int64) {
	impl, ok := a.(k8stesting.ListActionImpl)
	if inj.views == nil || !ok {
		return a, 0
	}
	o := impl.ListOptions
	q := listQuery{rv: o.ResourceVersion, match: string(o.ResourceVersionMatch), cont: o.Continue != "", isList: true, resource: r.Resource}
	at, _ := inj.staleFor(r, q)
	if at == 0 {
		return a, 0
	}
	impl.ListOptions.ResourceVersion = strconv.FormatInt(at, 10)
	impl.ListOptions.ResourceVersionMatch = metav1.ResourceVersionMatchExact
	return impl, at
}

// met reads the resourceVersion of a successful list or write answer for
// the stale views.
func (inj *Injector) met(r Request, handled bool, obj runtime.Object, err error) {
	if inj.views == nil || !handled || err != nil || r.Verb == "get" {
		return
	}
	rv := ""
	if l, lErr := meta.ListAccessor(obj); lErr == nil && obj != nil {
		rv = l.GetResourceVersion()
	}
	if m, mErr := meta.Accessor(obj); mErr == nil && obj != nil && m.GetName() != "" {
		rv = m.GetResourceVersion()
	}
	if r.Verb != "list" {
		inj.views.wrote(r.Verb, objectKey(r.Resource, r.Namespace, r.Name), rv)
	}
	inj.views.met(inj.clock.Now(), rv)
}

// requestFaults applies the request faults to r: the first that fires with
// an error answers.
func (inj *Injector) requestFaults(r Request) error {
	for i, in := range inj.plan.Injections {
		f, isRequest := in.Fault.(requestFault)
		if !isRequest || !in.Fault.Target().Matches(r) {
			continue
		}
		n := inj.fires(i, r.String())
		if n == 0 {
			continue
		}
		at := inj.clock.Now()
		if err := f.answer(r).fake(); err != nil {
			inj.record(i, at, r.String(), n, "answered "+err.Error())
			return err
		}
		inj.record(i, at, r.String(), n, "passed on")
	}
	return nil
}

func (inj *Injector) reactWatch(a k8stesting.Action, chain []k8stesting.WatchReactor) (bool, watch.Interface, error) {
	if inj.Crashed() {
		return true, nil, refused("in-process")
	}
	r := fakeRequest(a)
	if err := inj.requestFaults(r); err != nil {
		return true, nil, err
	}
	for _, reactor := range chain {
		if !reactor.Handles(a) {
			continue
		}
		handled, w, err := reactor.React(a)
		if !handled {
			continue
		}
		if err != nil {
			return true, nil, err
		}
		return true, inj.proxyWatch(w, r, inj.watchInjections(r)), nil
	}
	return false, nil, nil
}

// proxyWatch applies the watch faults to the events of w.
func (inj *Injector) proxyWatch(w watch.Interface, r Request, injections []int) watch.Interface {
	p := &proxyWatch{out: make(chan watch.Event), stop: make(chan struct{}), cutCh: make(chan struct{})}
	inj.watches.trackFake(p, r)
	go func() {
		defer close(p.out)
		defer w.Stop()
		defer inj.watches.untrackFake(p)
		for {
			var ev watch.Event
			var ok bool
			select {
			case ev, ok = <-w.ResultChan():
				if !ok || inj.Crashed() {
					return // a dead process's watch is gone
				}
			case <-p.stop:
				return
			case <-p.cutCh:
				return // the connection died
			}
			act := frameAction{}
			m, err := meta.Accessor(ev.Object)
			if err == nil && ev.Type != watch.Error && ev.Type != watch.Bookmark {
				object := Request{Verb: "watch", Group: r.Group, Resource: r.Resource, Namespace: m.GetNamespace(), Name: m.GetName()}
				act = inj.eventAction(injections, string(ev.Type), object)
			}
			if until := inj.heldUntil(r); !until.IsZero() {
				act.delay = max(act.delay, until.Sub(inj.clock.Now()))
			}
			if act.closeNow {
				return
			}
			if act.delay > 0 && !p.wait(act.delay) {
				return
			}
			if inj.views != nil && err == nil && ev.Type != watch.Error {
				inj.views.met(inj.clock.Now(), m.GetResourceVersion())
				if ev.Type == watch.Deleted && !act.drop {
					inj.views.deleted(objectKey(r.Resource, m.GetNamespace(), m.GetName()), m.GetResourceVersion())
				}
			}
			sends := 0
			if !act.drop {
				sends = 1
				if act.duplicate {
					sends = 2
				}
			}
			for range sends {
				if !p.send(ev) {
					return
				}
			}
			if act.expire {
				status := apierrors.NewResourceExpired("converge: injected, too old resource version").Status()
				p.send(watch.Event{Type: watch.Error, Object: &status})
				return
			}
		}
	}()
	return p
}

type proxyWatch struct {
	out     chan watch.Event
	stop    chan struct{} // the consumer stopped
	once    sync.Once
	cutCh   chan struct{} // the injector broke the stream
	cutOnce sync.Once
}

func (p *proxyWatch) cut() { p.cutOnce.Do(func() { close(p.cutCh) }) }

func (p *proxyWatch) send(ev watch.Event) bool {
	select {
	case p.out <- ev:
		return true
	case <-p.stop:
		return false
	}
}

func (p *proxyWatch) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}

func (p *proxyWatch) Stop()                          { p.once.Do(func() { close(p.stop) }) }
func (p *proxyWatch) ResultChan() <-chan watch.Event { return p.out }
