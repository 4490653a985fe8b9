package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/reports"
)

// Invariants, as named in violations.
const (
	InvReplicasWithinMax = "replicas-within-max"
	InvNeverScalesDown   = "never-scales-down"
	InvWritesOnlyReplica = "writes-only-replicas-and-own-annotations"
	InvOnlyLabelled      = "writes-only-labelled-deployments"
	InvNoPanic           = "no-panic"
	InvCleanShutdown     = "clean-shutdown"
	InvSingleWriter      = "one-writer-at-a-time"
	InvNoHotLoop         = "no-hot-loop"
)

// recordFake puts a recorder in front of a fake clientset's chains (and so
// in front of the chaos injector): it sees every request as the controller
// does, injected answers included.
func recordFake(cs *k8sfake.Clientset, idx int, r *run) {
	cs.Fake.Lock()
	defer cs.Fake.Unlock()
	reactions := cs.Fake.ReactionChain
	cs.Fake.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, runtime.Object, error) {
			for _, reactor := range reactions {
				if !reactor.Handles(a) {
					continue
				}
				handled, obj, err := reactor.React(a)
				if !handled {
					continue
				}
				r.fakeAction(idx, a, obj, err)
				return true, obj, err
			}
			return false, nil, nil
		}}}
	watches := cs.Fake.WatchReactionChain
	cs.Fake.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, watch.Interface, error) {
			for _, reactor := range watches {
				if !reactor.Handles(a) {
					continue
				}
				handled, w, err := reactor.React(a)
				if !handled {
					continue
				}
				r.fakeAction(idx, a, nil, err)
				return true, w, err
			}
			return false, nil, nil
		}}}
}

func (r *run) fakeAction(idx int, a k8stesting.Action, obj runtime.Object, err error) {
	q := reports.Request{At: time.Now(), Instance: idx, Verb: a.GetVerb(), Resource: a.GetResource().Resource, Code: code(a.GetVerb(), err)}
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
	r.hist.request(q)
	r.pace(q.At)
	if err != nil || a.GetResource().Resource != "deployments" || (a.GetSubresource() != "" && a.GetSubresource() != "scale") {
		return
	}
	switch act := a.(type) {
	case k8stesting.PatchAction:
		r.checkPatch(q, act.GetPatchType(), act.GetPatch())
	case k8stesting.UpdateAction:
		if a.GetVerb() != "update" {
			return
		}
		if d, ok := act.GetObject().(*appsv1.Deployment); ok {
			r.checkUpdate(q, d)
		}
	}
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

// recordHTTP records the requests of an HTTP client, outside its injector.
func recordHTTP(idx int, r *run) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			cr, ok := chaos.ParseRequest(req)
			if !ok {
				return next.RoundTrip(req)
			}
			var body []byte
			if cr.Resource == "deployments" && (cr.Verb == "patch" || cr.Verb == "update") && req.GetBody != nil {
				if b, err := req.GetBody(); err == nil {
					body, _ = io.ReadAll(io.LimitReader(b, 4<<20))
					_ = b.Close()
				}
			}
			at := time.Now()
			resp, err := next.RoundTrip(req)
			q := reports.Request{At: at, Instance: idx, Verb: cr.Verb, Resource: cr.Resource, Name: cr.Name}
			if cr.Subresource != "" {
				q.Resource += "/" + cr.Subresource
			}
			if err != nil {
				q.Error = err.Error()
			} else {
				q.Code = resp.StatusCode
			}
			r.hist.request(q)
			r.pace(q.At)
			if err == nil && resp.StatusCode < 300 && body != nil && (cr.Subresource == "" || cr.Subresource == "scale") {
				if cr.Verb == "patch" {
					r.checkPatch(q, types.PatchType(req.Header.Get("Content-Type")), body)
				} else if cr.Subresource == "" {
					var d appsv1.Deployment
					if json.Unmarshal(body, &d) == nil {
						r.checkUpdate(q, &d)
					}
				}
			}
			return resp, err
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// checkWriter: a write by one instance while another that wrote before is
// still alive means two writers at once (a failover without fencing).
func (r *run) checkWriter(q reports.Request) {
	r.mu.Lock()
	prev, had := r.lastWriter, r.wrote
	r.lastWriter, r.wrote = q.Instance, true
	other := r.instances[prev]
	alive := had && prev != q.Instance && other != nil && !other.ended
	r.mu.Unlock()
	if alive {
		r.hist.violate(InvSingleWriter, q.At, q.Name, q.String(), fmt.Sprintf("instance %d wrote %s while instance %d, which wrote before it, was still running", q.Instance, q.Name, prev))
	}
}

// checkPatch judges a successful patch of a Deployment by the controller.
func (r *run) checkPatch(q reports.Request, pt types.PatchType, patch []byte) {
	r.hist.wrote(q.Name)
	r.checkWriter(q)
	var doc any
	if err := json.Unmarshal(patch, &doc); err != nil {
		r.hist.violate(InvWritesOnlyReplica, q.At, q.Name, q.String(), "a patch that is not JSON: "+string(patch))
		return
	}
	var paths []string
	var replicas *int64
	var rv string
	switch p := doc.(type) {
	case []any: // JSON patch
		for _, op := range p {
			m, _ := op.(map[string]any)
			path, _ := m["path"].(string)
			paths = append(paths, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "."))
			if path == "/spec/replicas" {
				if v, ok := m["value"].(float64); ok {
					n := int64(v)
					replicas = &n
				}
			}
		}
	case map[string]any: // merge and strategic merge patches
		leaves("", p, &paths)
		if spec, ok := p["spec"].(map[string]any); ok {
			if v, ok := spec["replicas"].(float64); ok {
				n := int64(v)
				replicas = &n
			}
		}
		if md, ok := p["metadata"].(map[string]any); ok {
			rv, _ = md["resourceVersion"].(string)
		}
	}
	for _, path := range paths {
		if !allowedPath(path) {
			r.hist.violate(InvWritesOnlyReplica, q.At, q.Name, q.String(), fmt.Sprintf("the controller's %s patch of %s sets %s", pt, q.Name, path))
		}
	}
	base, ok := r.obs.version(q.Name, rv)
	if !ok {
		return
	}
	r.checkBase(q, base, replicas)
}

// checkUpdate judges a successful update of a Deployment by the
// controller, against the version it was based on.
func (r *run) checkUpdate(q reports.Request, d *appsv1.Deployment) {
	r.hist.wrote(q.Name)
	r.checkWriter(q)
	base, ok := r.obs.version(q.Name, d.ResourceVersion)
	if !ok {
		return
	}
	var replicas *int64
	if d.Spec.Replicas != nil {
		n := int64(*d.Spec.Replicas)
		replicas = &n
	}
	a, b := base.DeepCopy(), d.DeepCopy()
	a.Spec.Replicas, b.Spec.Replicas = nil, nil
	for _, x := range []*appsv1.Deployment{a, b} {
		for k := range x.Annotations {
			if strings.HasPrefix(k, "converge.dev/") {
				delete(x.Annotations, k)
			}
		}
	}
	switch {
	case !apiequality.Semantic.DeepEqual(a.Spec, b.Spec):
		r.hist.violate(InvWritesOnlyReplica, q.At, q.Name, q.String(), "the controller's update of "+q.Name+" changes its spec beyond replicas")
	case !apiequality.Semantic.DeepEqual(a.Labels, b.Labels) || !equalMaps(a.Annotations, b.Annotations):
		r.hist.violate(InvWritesOnlyReplica, q.At, q.Name, q.String(), "the controller's update of "+q.Name+" changes labels or annotations not its own")
	}
	r.checkBase(q, base, replicas)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkBase: the write was of a labelled Deployment, and its replicas are
// neither lower than before nor above the max.
func (r *run) checkBase(q reports.Request, base *appsv1.Deployment, replicas *int64) {
	if base.Labels[controller.LabelEnabled] != controller.ValueEnabled {
		r.hist.violate(InvOnlyLabelled, q.At, q.Name, q.String(), "the controller wrote "+q.Name+", which does not carry "+controller.LabelEnabled+"="+controller.ValueEnabled)
	}
	if replicas == nil {
		return
	}
	before := int64(1)
	if base.Spec.Replicas != nil {
		before = int64(*base.Spec.Replicas)
	}
	if *replicas < before {
		r.hist.violate(InvNeverScalesDown, q.At, q.Name, q.String(), fmt.Sprintf("the controller lowered %s from %d to %d replicas", q.Name, before, *replicas))
	}
	if m := maxOf(base); int64(m) < *replicas {
		r.hist.violate(InvReplicasWithinMax, q.At, q.Name, q.String(), fmt.Sprintf("the controller set %s to %d replicas, above its max %d", q.Name, *replicas, m))
	}
}

func leaves(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		p := join(prefix, k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			leaves(p, sub, out)
			continue
		}
		*out = append(*out, p)
	}
}

func allowedPath(p string) bool {
	switch {
	case p == "spec.replicas", p == "metadata.resourceVersion":
		return true
	case strings.HasPrefix(p, "metadata.annotations."):
		return strings.HasPrefix(strings.TrimPrefix(p, "metadata.annotations."), "converge.dev/")
	}
	return false
}
