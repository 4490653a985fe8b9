package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Configure returns a copy of cfg whose clients go through inj: JSON on the
// wire (so watch frames can be rewritten) and inj's RoundTripper right above
// the HTTP transport.
func Configure(cfg *rest.Config, inj *Injector) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.Wrap(inj.Wrap)
	return c
}

// Wrap returns rt with the plan's faults applied.
func (inj *Injector) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &transport{inj: inj, next: rt}
}

type transport struct {
	inj  *Injector
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.inj.Crashed() {
		return nil, t.inj.refused(req)
	}
	r, ok := ParseRequest(req)
	if !ok {
		return t.next.RoundTrip(req)
	}
	for i, in := range t.inj.plan.Injections {
		f, isRequest := in.Fault.(requestFault)
		if !isRequest || !in.Fault.Target().Matches(r) {
			continue
		}
		n := t.inj.fires(i, r.String())
		if n == 0 {
			continue
		}
		at := t.inj.clock.Now()
		resp, err := f.answer(r).http(req)
		switch {
		case err != nil:
			t.inj.record(i, at, r.String(), n, "failed: "+err.Error())
			return nil, err
		case resp != nil:
			t.inj.record(i, at, r.String(), n, "answered "+resp.Status)
			return resp, nil
		default:
			t.inj.record(i, at, r.String(), n, "passed on")
		}
	}
	var resp *http.Response
	var err error
	if t.inj.views != nil && (r.Verb == "list" || r.Watch()) {
		at, refuse := t.inj.staleFor(r, queryOf(req, r))
		switch {
		case refuse:
			return statusResponse(errStreamRefused(), 0)
		case at > 0:
			resp, err = t.listAt(req, r, at)
		}
	}
	if resp == nil && err == nil {
		resp, err = t.next.RoundTrip(req)
	}
	if err == nil && resp.StatusCode < 300 {
		t.inj.after(r)
		if t.inj.views != nil && !r.Watch() && r.Verb != "get" {
			t.inj.meet(resp, r)
		}
	}
	if err != nil || !r.Watch() || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	resp.Body = fencedBody{ReadCloser: t.inj.watches.track(resp.Body, r), inj: t.inj}
	if watching := t.inj.watchInjections(r); len(watching) > 0 || t.inj.watchesStale(r) {
		resp.Body = t.inj.rewrite(resp.Body, r, watching)
	}
	return resp, nil
}

// eventAction is what the watch faults among injections do to an event of
// the given type of object; each one that fires is recorded.
func (inj *Injector) eventAction(injections []int, eventType string, object Request) frameAction {
	var act frameAction
	for _, i := range injections {
		wf := inj.plan.Injections[i].Fault.(watchFault)
		if !wf.Target().Matches(object) {
			continue
		}
		a := wf.onEvent(eventType)
		if a == (frameAction{}) {
			continue
		}
		key := eventType + " " + object.String()
		n := inj.fires(i, key)
		if n == 0 {
			continue
		}
		inj.record(i, inj.clock.Now(), key, n, describe(a))
		act = merge(act, a)
	}
	return act
}

// watchInjections are the watch faults that may act on the watch r.
func (inj *Injector) watchInjections(r Request) []int {
	var out []int
	for i, in := range inj.plan.Injections {
		if _, isWatch := in.Fault.(watchFault); isWatch && resourceMatches(in.Fault.Target(), r) {
			out = append(out, i)
		}
	}
	return out
}

// resourceMatches: a watch fault's target names objects; the watch request
// only has to be of their resource and namespace.
func resourceMatches(t Target, r Request) bool {
	return (t.Resource == "" || t.Resource == r.Resource) && (t.Namespace == "" || r.Namespace == "" || t.Namespace == r.Namespace)
}

// rewrite runs the watch stream through the watch faults.
func (inj *Injector) rewrite(body io.ReadCloser, r Request, injections []int) io.ReadCloser {
	pr, pw := io.Pipe()
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		err := inj.pump(body, pw, r, injections, stop)
		_ = pw.CloseWithError(err)
	}()
	return &rewrittenBody{PipeReader: pr, orig: body, done: done, stop: stop}
}

type rewrittenBody struct {
	*io.PipeReader
	orig      io.ReadCloser
	done      chan struct{}
	stop      chan struct{} // closed by Close: a delayed frame is given up
	closeOnce sync.Once
}

// Close ends the stream. A frame being held back is dropped at once: the
// watcher's Stop waits here holding its lock, which its receiving
// goroutine wants, and in a synctest bubble a goroutine waiting on a
// mutex keeps virtual time, and so the delay, from ever ending.
func (b *rewrittenBody) Close() error {
	b.closeOnce.Do(func() { close(b.stop) })
	_ = b.PipeReader.Close()
	err := b.orig.Close()
	<-b.done
	return err
}

func (inj *Injector) pump(body io.Reader, out *io.PipeWriter, r Request, injections []int, stop <-chan struct{}) error {
	frames := newFrameReader(body)
	for {
		f, err := frames.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		name, namespace, rv := f.meta()
		object := Request{Verb: "watch", Group: r.Group, Resource: r.Resource, Namespace: namespace, Name: name}
		act := inj.eventAction(injections, f.Type, object)
		if until := inj.heldUntil(r); !until.IsZero() {
			act.delay = max(act.delay, until.Sub(inj.clock.Now()))
		}
		if act.closeNow {
			return nil
		}
		if act.delay > 0 {
			// The stream itself is what is late.
			timer := time.NewTimer(act.delay)
			select {
			case <-timer.C:
			case <-stop:
				timer.Stop()
				return nil
			}
		}
		if inj.views != nil {
			inj.views.met(inj.clock.Now(), rv)
			if f.Type == "DELETED" && !act.drop {
				inj.views.deleted(objectKey(r.Resource, namespace, name), rv)
			}
		}
		if !act.drop {
			if err := write(out, f); err != nil {
				return err
			}
			if act.duplicate {
				if err := write(out, f); err != nil {
					return err
				}
			}
		}
		if act.expire {
			status := apierrors.NewResourceExpired("converge: injected, too old resource version").Status()
			status.Kind, status.APIVersion = "Status", "v1"
			obj, _ := json.Marshal(status)
			return write(out, Frame{Type: "ERROR", Object: obj})
		}
	}
}

func write(w io.Writer, f Frame) error {
	b, err := f.encode()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func merge(a, b frameAction) frameAction {
	a.drop = a.drop || b.drop
	a.duplicate = a.duplicate || b.duplicate
	a.closeNow = a.closeNow || b.closeNow
	a.expire = a.expire || b.expire
	a.delay = max(a.delay, b.delay)
	return a
}

func describe(a frameAction) string {
	switch {
	case a.drop && a.expire:
		return "dropped, stream ended with 410"
	case a.drop:
		return "dropped"
	case a.closeNow:
		return "stream closed"
	case a.expire:
		return "stream ended with 410"
	case a.duplicate:
		return "duplicated"
	case a.delay > 0:
		return "delayed " + a.delay.String()
	}
	return "passed"
}

// listAt sends the list r at resourceVersion rv, exactly, for a stale
// view; a server that cannot serve it (compacted) is asked the original
// request instead, and the firing says why.
func (t *transport) listAt(req *http.Request, r Request, rv int64) (*http.Response, error) {
	past := req.Clone(req.Context())
	q := past.URL.Query()
	q.Set("resourceVersion", strconv.FormatInt(rv, 10))
	q.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
	past.URL.RawQuery = q.Encode()
	resp, err := t.next.RoundTrip(past)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		t.inj.staleServed(r, rv, nil)
		return resp, nil
	}
	msg := resp.Status
	if body, rErr := io.ReadAll(io.LimitReader(resp.Body, 1<<16)); rErr == nil {
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Message != "" {
			msg = status.Message
		}
	}
	_ = resp.Body.Close()
	t.inj.staleServed(r, rv, errors.New(msg))
	return t.next.RoundTrip(req)
}

// meet reads the resourceVersion of a successful list or write answer for
// the stale views, putting the body back.
func (inj *Injector) meet(resp *http.Response, r Request) {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	var o object
	_ = json.Unmarshal(body, &o)
	rv := o.Metadata.ResourceVersion
	if r.Verb != "list" {
		if o.Metadata.Name == "" {
			rv = "" // a Status: the object's version is not known
		}
		inj.views.wrote(r.Verb, objectKey(r.Resource, r.Namespace, r.Name), rv)
	}
	inj.views.met(inj.clock.Now(), rv)
}
