package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// Built-in invariants, judged for any controller (package check has
// each).
const (
	InvNoPanic       = check.NoPanic
	InvCleanShutdown = check.CleanShutdown
	InvSingleWriter  = check.OneWriterAtATime
	InvNoHotLoop     = check.NoHotLoop
	// InvNoCacheMutation breaks when the controller modifies an object
	// its informer's cache holds.
	InvNoCacheMutation = check.NoCacheMutation
	InvNoForbidden     = check.NoForbiddenRequest
	// InvWritesAllowed is judged when the scenario has write rules.
	InvWritesAllowed = check.WritesAllowed
	// InvNoWriteWar breaks when two of the scenario's controllers keep
	// undoing each other's value of one field; judged when it runs others.
	InvNoWriteWar = check.NoWriteWar
	// InvRuleError breaks when an invariant's rule cannot be evaluated
	// for a reason other than a field not being there.
	InvRuleError = check.InvariantEvaluates
)

// BuiltinInvariants are the invariants judged for any controller.
var BuiltinInvariants = check.Invariants()

// recordFake puts a recorder in front of a fake clientset's chains (and so
// in front of the chaos injector) of instance idx of c: it sees every
// request as the controller does, injected answers included.
func recordFake(cs *k8sfake.Clientset, idx int, c *controllerRun, r *run) {
	cs.Fake.Lock()
	defer cs.Fake.Unlock()
	reactions := cs.Fake.ReactionChain
	cs.Fake.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, runtime.Object, error) {
			// The store takes the request's object over (and stamps it):
			// what the controller sent is copied first.
			seen := r.hist.events()
			var sent runtime.Object
			if c, ok := a.(k8stesting.CreateAction); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") && c.GetObject() != nil {
				sent = c.GetObject().DeepCopyObject()
			}
			for _, reactor := range reactions {
				if !reactor.Handles(a) {
					continue
				}
				handled, obj, err := reactor.React(a)
				if !handled {
					continue
				}
				r.fakeAction(idx, c, a, seen, sent, err)
				return true, obj, err
			}
			return false, nil, nil
		}}}
	watches := cs.Fake.WatchReactionChain
	cs.Fake.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, watch.Interface, error) {
			seen := r.hist.events()
			for _, reactor := range watches {
				if !reactor.Handles(a) {
					continue
				}
				handled, w, err := reactor.React(a)
				if !handled {
					continue
				}
				r.fakeAction(idx, c, a, seen, nil, err)
				if err == nil && w != nil {
					w = r.caches.trackWatch(idx, w)
				}
				return true, w, err
			}
			return false, nil, nil
		}}}
}

// fakeAction records a request of the fake clientset: seen is how many
// events the history held when it was sent, sent the object a create or
// update sent, as it was sent.
func (r *run) fakeAction(idx int, c *controllerRun, a k8stesting.Action, seen int, sent runtime.Object, err error) {
	verb := a.GetVerb()
	if verb == "delete-collection" {
		verb = "deletecollection"
	}
	q := reports.Request{At: time.Now(), Instance: idx, Controller: c.name, Verb: verb, Resource: a.GetResource().Resource, Namespace: a.GetNamespace(), Code: code(verb, err), Seen: seen}
	if a.GetSubresource() != "" {
		q.Resource += "/" + a.GetSubresource()
	}
	switch act := a.(type) {
	case interface{ GetName() string }:
		q.Name = act.GetName()
	case k8stesting.CreateAction:
		if m, e := meta.Accessor(act.GetObject()); e == nil {
			q.Name = m.GetName()
		}
	}
	if err != nil {
		q.Error = err.Error()
	}
	var w *Write
	if err == nil && check.IsWrite(verb) {
		w = &Write{Request: q, GVR: a.GetResource(), Subresource: a.GetSubresource(), Namespace: a.GetNamespace()}
		switch act := a.(type) {
		case k8stesting.PatchAction:
			w.PatchType, w.Patch = act.GetPatchType(), act.GetPatch()
		default:
			if sent != nil && (verb == "create" || verb == "update") {
				if u, e := runtime.DefaultUnstructuredConverter.ToUnstructured(sent); e == nil {
					w.Object = u
				}
			}
		}
		q.Body = w.body()
		w.Request = q
	}
	r.hist.request(q)
	r.pace(q)
	if w != nil && c.primary() {
		r.wrote(*w)
	}
}

// body is what w sent, as the history keeps it.
func (w *Write) body() *reports.Body {
	b := &reports.Body{Group: w.GVR.Group, Version: w.GVR.Version, Subresource: w.Subresource, PatchType: string(w.PatchType)}
	if len(w.Patch) > 0 {
		b.Patch = check.BodyPatch(w.Patch)
	}
	if w.Object != nil {
		b.Object = check.Record(&unstructured.Unstructured{Object: w.Object})
	}
	return b
}

func code(verb string, err error) int {
	var status apierrors.APIStatus
	switch {
	case err == nil && verb == "create":
		return http.StatusCreated
	case err == nil:
		return http.StatusOK
	case errors.As(err, &status):
		return int(status.Status().Code)
	}
	return 0
}

// recordHTTP records the requests of an HTTP client of instance idx of c,
// outside its injector.
func recordHTTP(idx int, c *controllerRun, r *run) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			cr, ok := chaos.ParseRequest(req)
			if !ok {
				return next.RoundTrip(req)
			}
			var body []byte
			if cr.Verb == "patch" || cr.Verb == "update" || cr.Verb == "create" {
				body = readBody(req)
			}
			at, seen := time.Now(), r.hist.events()
			resp, err := next.RoundTrip(req)
			q := reports.Request{At: at, Instance: idx, Controller: c.name, Verb: cr.Verb, Resource: cr.Resource, Namespace: cr.Namespace, Name: cr.Name, Seen: seen}
			if cr.Subresource != "" {
				q.Resource += "/" + cr.Subresource
			}
			if err != nil {
				q.Error = err.Error()
			} else {
				q.Code = resp.StatusCode
			}
			var w *Write
			if err == nil && resp.StatusCode < 300 && check.IsWrite(cr.Verb) {
				w = &Write{GVR: schema.GroupVersionResource{Group: cr.Group, Version: cr.Version, Resource: cr.Resource},
					Subresource: cr.Subresource, Namespace: cr.Namespace}
				switch cr.Verb {
				case "patch":
					w.PatchType, w.Patch = types.PatchType(req.Header.Get("Content-Type")), body
				case "create", "update":
					var obj map[string]any
					if json.Unmarshal(body, &obj) == nil {
						w.Object = obj
						if q.Name == "" {
							if md, ok := obj["metadata"].(map[string]any); ok {
								q.Name, _ = md["name"].(string)
							}
						}
					}
				}
				q.Body = w.body()
				w.Request = q
			}
			r.hist.request(q)
			r.pace(q)
			if w != nil && c.primary() {
				r.wrote(*w)
			}
			return resp, err
		})
	}
}

// maxBody is the largest request body the recorder reads: more than the
// API server takes.
const maxBody = 4 << 20

// readBody is req's body, read again where the client can send it again,
// else read and put back (a request a proxy forwards); nil when it cannot
// be read whole.
func readBody(req *http.Request) []byte {
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil
		}
		defer b.Close()
		data, err := io.ReadAll(io.LimitReader(b, maxBody+1))
		if err != nil || len(data) > maxBody {
			return nil
		}
		return data
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	req.Body = readCloser{io.MultiReader(bytes.NewReader(data), req.Body), req.Body}
	if err != nil || len(data) > maxBody {
		return nil
	}
	return data
}

type readCloser struct {
	io.Reader
	io.Closer
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrote shows one successful write of the controller under test to its
// own judge (another controller's writes are not its).
func (r *run) wrote(w Write) {
	if j := r.judge; j != nil {
		j.Wrote(w)
	}
}
