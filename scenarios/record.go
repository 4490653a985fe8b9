package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
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
	// InvNoBlindDelete breaks when a delete removes an object its
	// instance had never received (a replacement of the one it knew).
	InvNoBlindDelete = check.NoBlindDelete
	// InvNoChildOfDeletedOwner breaks when an instance creates a child of
	// an owner whose deletion it had received.
	InvNoChildOfDeletedOwner = check.NoChildOfDeletedOwner
	// InvNoStaleWrite breaks when a write sets a field back to an older
	// value over the controller's own newer one, from a stale view.
	InvNoStaleWrite = check.NoStaleWrite
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
			seen, received := r.hist.events(), r.hist.received()
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
				r.fakeAction(idx, c, a, seen, received, sent, obj, err)
				return true, obj, err
			}
			return false, nil, nil
		}}}
	watches := cs.Fake.WatchReactionChain
	cs.Fake.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, watch.Interface, error) {
			seen, received := r.hist.events(), r.hist.received()
			for _, reactor := range watches {
				if !reactor.Handles(a) {
					continue
				}
				handled, w, err := reactor.React(a)
				if !handled {
					continue
				}
				r.fakeAction(idx, c, a, seen, received, nil, nil, err)
				if err == nil && w != nil {
					w = r.caches.trackWatch(idx, c.name, a.GetResource().Resource, w)
				}
				return true, w, err
			}
			return false, nil, nil
		}}}
}

// fakeAction records a request of the fake clientset and what its answer
// told the instance: seen and received are how many events and receipts
// the history held when it was sent, sent the object a create or update
// sent, as it was sent, answer the object the store answered.
func (r *run) fakeAction(idx int, c *controllerRun, a k8stesting.Action, seen, received int, sent, answer runtime.Object, err error) {
	verb := a.GetVerb()
	if verb == "delete-collection" {
		verb = "deletecollection"
	}
	q := reports.Request{At: time.Now(), Instance: idx, Controller: c.name, Verb: verb, Resource: a.GetResource().Resource, Namespace: a.GetNamespace(),
		Code: code(verb, err), Seen: seen, Received: received}
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
	if err == nil && answer != nil {
		q.UID = r.answered(idx, c, verb, a.GetResource().Resource, metasOf(answer))
	}
	// A write's body is kept when it succeeded, and when it got no answer
	// (the server may have carried it out: writes-allowed judges it).
	var w *Write
	done := err == nil
	if (done || q.Code == 0) && check.IsWrite(verb) {
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
	if w != nil && done && c.primary() {
		r.wrote(*w)
	}
}

// objectMeta is what a receipt reads of an object.
type objectMeta struct {
	namespace, name, uid, rv string
}

// metasOf are the objects obj holds: a list's items, or obj itself.
func metasOf(obj runtime.Object) []objectMeta {
	var objs []runtime.Object
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil
		}
		objs = items
	} else {
		objs = []runtime.Object{obj}
	}
	out := make([]objectMeta, 0, len(objs))
	for _, o := range objs {
		if m, err := meta.Accessor(o); err == nil {
			out = append(out, objectMeta{m.GetNamespace(), m.GetName(), string(m.GetUID()), m.GetResourceVersion()})
		}
	}
	return out
}

// answered records what the successful answer to a request of instance
// idx of c told it, and returns the UID of the object a write's answer
// carried. A delete's answer is the object it removed: the instance
// learns of its deletion by its watch, as of anyone else's.
func (r *run) answered(idx int, c *controllerRun, verb, resource string, objs []objectMeta) string {
	switch verb {
	case "watch", "deletecollection":
		return ""
	case "delete":
	default:
		now := time.Now()
		answer := check.IsWrite(verb)
		rcs := make([]reports.Receipt, len(objs))
		for i, o := range objs {
			rcs[i] = reports.Receipt{At: now, Instance: idx, Controller: c.name, Resource: resource, Namespace: o.namespace, Name: o.name, UID: o.uid, RV: o.rv, Answer: answer}
		}
		r.hist.receive(rcs...)
	}
	if check.IsWrite(verb) && len(objs) == 1 {
		return objs[0].uid
	}
	return ""
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
			at, seen, received := time.Now(), r.hist.events(), r.hist.received()
			resp, err := next.RoundTrip(req)
			q := reports.Request{At: at, Instance: idx, Controller: c.name, Verb: cr.Verb, Resource: cr.Resource, Namespace: cr.Namespace, Name: cr.Name,
				Seen: seen, Received: received}
			if cr.Subresource != "" {
				q.Resource += "/" + cr.Subresource
			}
			if err != nil {
				q.Error = err.Error()
			} else {
				q.Code = resp.StatusCode
				q.UID = r.receiveHTTP(idx, c, cr, resp)
			}
			// As above: the body of a write that succeeded or got no answer.
			var w *Write
			done := err == nil && resp.StatusCode < 300
			if (done || err != nil) && check.IsWrite(cr.Verb) {
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
			if w != nil && done && c.primary() {
				r.wrote(*w)
			}
			return resp, err
		})
	}
}

// receiveHTTP records what a successful answer to a request of instance
// idx of c tells it (a watch's events as they pass), and returns the UID
// of the object a write's answer carried. An answer that is not JSON (a
// client that asked for protobuf) is not read.
func (r *run) receiveHTTP(idx int, c *controllerRun, cr chaos.Request, resp *http.Response) string {
	if resp.StatusCode >= 300 || resp.Body == nil || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return ""
	}
	if cr.Verb == "watch" {
		resp.Body = &receivingBody{ReadCloser: resp.Body, on: func(f watchFrame) {
			md := f.Object.Metadata
			r.receivedEvent(idx, c.name, cr.Resource, f.Type, objectMeta{md.Namespace, md.Name, md.UID, md.ResourceVersion})
		}}
		return ""
	}
	if cr.Subresource != "" && cr.Subresource != "status" && cr.Subresource != "scale" {
		return "" // not the object: logs, a binding, an eviction
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var doc answerDoc
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	var objs []objectMeta
	switch {
	case doc.Kind == "Status":
		if doc.Details != nil && cr.Verb == "delete" {
			objs = append(objs, objectMeta{cr.Namespace, doc.Details.Name, doc.Details.UID, ""})
		}
	case doc.Items != nil:
		for _, it := range doc.Items {
			objs = append(objs, objectMeta{it.Metadata.Namespace, it.Metadata.Name, it.Metadata.UID, it.Metadata.ResourceVersion})
		}
	default:
		objs = append(objs, objectMeta{doc.Metadata.Namespace, doc.Metadata.Name, doc.Metadata.UID, doc.Metadata.ResourceVersion})
	}
	if cr.Subresource == "scale" {
		return "" // a Scale carries its object's name and UID, but is not it
	}
	return r.answered(idx, c, cr.Verb, cr.Resource, objs)
}

// answerMeta is what a receipt reads of an object in an answer.
type answerMeta struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
		// ResourceVersion is the version received.
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// answerDoc is an answer: an object, a list, or a Status.
type answerDoc struct {
	Kind string `json:"kind"`
	answerMeta
	Items   []answerMeta `json:"items"`
	Details *struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"details"`
}

type watchFrame struct {
	Type   string     `json:"type"`
	Object answerMeta `json:"object"`
}

// receivingBody is a watch stream that hands each frame to on as the
// client reads it. A frame that grows past maxBody is not one, and ends
// the reading of frames (the stream itself flows on).
type receivingBody struct {
	io.ReadCloser
	buf    []byte
	broken bool
	on     func(watchFrame)
}

func (b *receivingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.broken || n == 0 {
		return n, err
	}
	b.buf = append(b.buf, p[:n]...)
	dec := json.NewDecoder(bytes.NewReader(b.buf))
	used := 0
	for {
		var f watchFrame
		if dec.Decode(&f) != nil {
			break
		}
		used = int(dec.InputOffset())
		b.on(f)
	}
	b.buf = append(b.buf[:0], b.buf[used:]...)
	if len(b.buf) > maxBody {
		b.broken, b.buf = true, nil
	}
	return n, err
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

// receivedEvent records a watch event (of type typ) of an object of
// resource that reached instance idx of the controller named so, on
// either door.
func (r *run) receivedEvent(idx int, controller, resource, typ string, o objectMeta) {
	if typ != string(watch.Added) && typ != string(watch.Modified) && typ != string(watch.Deleted) {
		return
	}
	rc := reports.Receipt{At: time.Now(), Instance: idx, Controller: controller, Resource: resource, Namespace: o.namespace, Name: o.name, UID: o.uid, RV: o.rv}
	if typ != string(watch.Deleted) {
		r.hist.receive(rc)
		return
	}
	gone := rc
	gone.Deleted = true
	r.hist.receive(rc, gone)
}
