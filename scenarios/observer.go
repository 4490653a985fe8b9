package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

// observer is the harness's god view of the kinds a scenario names: an
// unfaulted client's informers. It records what it sees, judges the
// scenario's invariants on every change and its goal when asked, and keeps
// each object's latest version for the write rules.
type observer struct {
	r          *run
	namespaced dynamicinformer.DynamicSharedInformerFactory
	cluster    dynamicinformer.DynamicSharedInformerFactory
	kinds      map[schema.GroupVersionKind]*kindInfo
	byResource map[string]*kindInfo // by plural resource name
	invariants []compiledInvariant
	goals      []compiledExpectation
	charts     []*charted
	// across are the kinds the invariants across objects read; judged
	// names the resourceVersions at which they were judged.
	across   []string
	judgedMu sync.Mutex
	judged   map[string]bool
	unjudged int
	stopCh   chan struct{}

	mu       sync.Mutex
	latest   map[objectKey]*unstructured.Unstructured
	versions map[objectKey][]*unstructured.Unstructured // the last keptVersions, oldest first
}

// keptVersions is how many versions of an object the observer keeps for
// the write rules: an update is judged against the version it was based
// on, which the observer saw shortly before.
const keptVersions = 16

type kindInfo struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
}

type objectKey struct {
	resource, namespace, name string
}

type compiledInvariant struct {
	Invariant
	expr       *expect.Expression
	transition bool
	sel        labels.Selector
}

type compiledExpectation struct {
	Expectation
	expr *expect.Expression
	sel  labels.Selector
}

func newObserver(r *run) (*observer, error) {
	o := &observer{r: r, kinds: map[schema.GroupVersionKind]*kindInfo{}, byResource: map[string]*kindInfo{},
		latest: map[objectKey]*unstructured.Unstructured{}, versions: map[objectKey][]*unstructured.Unstructured{}, stopCh: make(chan struct{})}
	o.namespaced = dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.kube.dynamic, 0, r.env.Namespace, nil)
	o.cluster = dynamicinformer.NewDynamicSharedInformerFactory(r.kube.dynamic, 0)
	for _, inv := range r.s.Invariants {
		expr, err := compileRule(inv.Rule)
		if err != nil {
			return nil, fmt.Errorf("invariant %s: %w", inv.Name, err)
		}
		sel, _ := labels.Parse(inv.Select.Labels)
		o.invariants = append(o.invariants, compiledInvariant{Invariant: inv, expr: expr, transition: expr.Transition(), sel: sel})
		if expr.Across() {
			o.across = append(o.across, kindsAcross(inv.Rule)...)
			o.across = append(o.across, inv.Select.Kind)
		}
	}
	for i, e := range r.s.Goal.Objects {
		c := compiledExpectation{Expectation: e}
		if e.Condition != "" {
			expr, err := expect.Compile(e.Condition, false)
			if err != nil {
				return nil, fmt.Errorf("goal.objects[%d]: %w", i, err)
			}
			c.expr = expr
		}
		c.sel, _ = labels.Parse(e.Select.Labels)
		o.goals = append(o.goals, c)
	}
	o.charts = chartedFields(&r.s)
	return o, nil
}

// start watches every kind the scenario names. Kinds are mapped to
// resources now, after the backend started: a CRD among the scenario's
// objects is installed by then only if the backend installed it, so its
// kinds are watched once createObjects has established them (watchLate).
func (o *observer) start(ctx context.Context) error {
	return o.watch(ctx, false)
}

// watchLate watches the kinds that could not be mapped before the
// scenario's CRDs were installed.
func (o *observer) watchLate(ctx context.Context) error {
	return o.watch(ctx, true)
}

func (o *observer) watch(ctx context.Context, late bool) error {
	var added []*kindInfo
	for _, gvk := range o.r.s.kinds() {
		if o.kinds[gvk] != nil {
			continue
		}
		m, err := o.r.kube.mapping(gvk)
		if err != nil {
			if meta.IsNoMatchError(err) && !late {
				continue // a kind of the scenario's CRDs: watched once they are in
			}
			return fmt.Errorf("observer: %w", err)
		}
		k := &kindInfo{gvk: gvk, gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
		factory := o.cluster
		if k.namespaced {
			factory = o.namespaced
		}
		k.informer = factory.ForResource(m.Resource).Informer()
		if _, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.changed(k, "ADDED", obj) },
			UpdateFunc: func(_, obj any) { o.changed(k, "MODIFIED", obj) },
			DeleteFunc: func(obj any) { o.changed(k, "DELETED", obj) },
		}); err != nil {
			return err
		}
		o.mu.Lock() // kindNamed reads it from the handlers of kinds watched already
		o.kinds[gvk] = k
		o.byResource[m.Resource.Resource] = k
		o.mu.Unlock()
		added = append(added, k)
	}
	if len(added) == 0 {
		return nil
	}
	o.namespaced.Start(o.stopCh)
	o.cluster.Start(o.stopCh)
	for _, k := range added {
		if !cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
			return fmt.Errorf("observer: the %s cache did not sync", k.gvr.Resource)
		}
	}
	return nil
}

func (o *observer) stop() {
	close(o.stopCh)
	o.namespaced.Shutdown()
	o.cluster.Shutdown()
}

func (o *observer) changed(k *kindInfo, typ string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	o.r.hist.event(reports.WatchEvent{At: now, Type: typ, Resource: k.gvr.Resource, Name: u.GetName(), RV: u.GetResourceVersion()})
	key := objectKey{k.gvr.Resource, u.GetNamespace(), u.GetName()}
	o.mu.Lock()
	prev := o.latest[key]
	if typ == "DELETED" {
		delete(o.latest, key)
		delete(o.versions, key)
	} else {
		o.latest[key] = u
		vs := append(o.versions[key], u)
		o.versions[key] = vs[max(len(vs)-keptVersions, 0):]
	}
	o.mu.Unlock()
	if len(o.across) > 0 {
		o.judgeAcross(u.GetResourceVersion(), now)
	}
	if typ == "DELETED" {
		return
	}
	if len(o.charts) > 0 {
		o.r.hist.chart(o.charts, k.gvk.GroupVersion().String()+" "+k.gvk.Kind, u, now)
	}
	for _, inv := range o.invariants {
		if inv.expr.Across() {
			continue
		}
		if inv.Select.APIVersion != k.gvk.GroupVersion().String() || inv.Select.Kind != k.gvk.Kind || !matches(inv.Select.Name, inv.sel, u) {
			continue
		}
		var old map[string]any
		if inv.transition {
			if prev == nil {
				continue
			}
			old = prev.Object
		}
		held, err := inv.expr.Eval(u.Object, old)
		switch {
		case errors.Is(err, expect.ErrMissing):
			// A field not there yet: the rule says nothing of this version.
		case err != nil:
			o.r.hist.find(finding(InvRuleError, now, objectSubject(u), nil, fmt.Sprintf("invariant %s on %s %s: %v", inv.Name, k.gvk.Kind, u.GetName(), err)))
		case !held:
			o.r.hist.find(finding(inv.Name, now, objectSubject(u), nil, fmt.Sprintf("%s %s (resourceVersion %s): %s is false", k.gvk.Kind, u.GetName(), u.GetResourceVersion(), inv.Rule)))
		}
	}
}

func matches(name string, sel labels.Selector, u *unstructured.Unstructured) bool {
	return (name == "" || name == u.GetName()) && (sel == nil || sel.Matches(labels.Set(u.GetLabels())))
}

// selected are the observed objects sel matches, by name.
func (o *observer) selected(sel Selector) []*unstructured.Unstructured {
	gv, _ := schema.ParseGroupVersion(sel.APIVersion)
	k := o.kinds[gv.WithKind(sel.Kind)]
	if k == nil {
		return nil
	}
	ls, err := labels.Parse(sel.Labels)
	if err != nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, obj := range k.informer.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && matches(sel.Name, ls, u) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// selects reports whether sel matches obj, an object of resource.
func (o *observer) selects(sel Selector, resource string, obj map[string]any) bool {
	k := o.byResource[resource]
	if k == nil || sel.APIVersion != k.gvk.GroupVersion().String() || sel.Kind != k.gvk.Kind {
		return false
	}
	ls, err := labels.Parse(sel.Labels)
	if err != nil {
		return false
	}
	return matches(sel.Name, ls, &unstructured.Unstructured{Object: obj})
}

// version is an object as observed at resourceVersion rv, or its latest
// observed version when rv is empty; nil when not observed.
func (o *observer) version(resource, namespace, name, rv string) map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := objectKey{resource, namespace, name}
	if rv == "" {
		if u := o.latest[key]; u != nil {
			return u.Object
		}
		return nil
	}
	for _, u := range o.versions[key] {
		if u.GetResourceVersion() == rv {
			return u.Object
		}
	}
	return nil
}

// goal judges the scenario's expectations on the objects observed now.
func (o *observer) goal() (bool, string) {
	for i, e := range o.goals {
		objs := o.selected(e.Select)
		what := describe(e.Select)
		if e.Count != nil {
			if len(objs) != *e.Count {
				return false, fmt.Sprintf("goal.objects[%d]: %d %s, want %d", i, len(objs), what, *e.Count)
			}
		} else if len(objs) == 0 {
			return false, fmt.Sprintf("goal.objects[%d]: no %s yet", i, what)
		}
		for _, u := range objs {
			if e.Match != nil {
				if ms := expect.Match(map[string]any(e.Match), u.Object); len(ms) > 0 {
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s", i, u.GetKind(), u.GetName(), ms[0])
				}
			}
			if e.expr != nil {
				held, err := e.expr.Eval(u.Object, nil)
				switch {
				case errors.Is(err, expect.ErrMissing):
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %v", i, u.GetKind(), u.GetName(), err)
				case err != nil:
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s cannot be evaluated: %v", i, u.GetKind(), u.GetName(), e.Condition, err)
				case !held:
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s is false", i, u.GetKind(), u.GetName(), e.Condition)
				}
			}
		}
	}
	return true, ""
}

// describe is "Deployments web-0" or "Deployments app=web".
func describe(sel Selector) string {
	what := sel.Kind
	if sel.Name != "" {
		what += " " + sel.Name
	}
	if sel.Labels != "" {
		what += " (" + sel.Labels + ")"
	}
	return what
}

// patchPaths are the field paths a patch sets.
func patchPaths(pt types.PatchType, patch []byte) []string {
	var doc any
	if err := json.Unmarshal(patch, &doc); err != nil {
		return []string{"(a patch that is not JSON)"}
	}
	var out []string
	switch p := doc.(type) {
	case []any: // JSON patch
		for _, op := range p {
			m, _ := op.(map[string]any)
			ptr, _ := m["path"].(string)
			var path expect.Path
			for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
				part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
				path = append(path, expect.Segment{Key: part, Index: -1})
			}
			out = append(out, path.String())
		}
	case map[string]any: // merge, strategic merge and apply patches
		leafPaths(nil, p, &out)
	}
	return slices.DeleteFunc(out, ignoredPath)
}

// ignoredPath: fields a write carries that say nothing of what it changes.
func ignoredPath(p string) bool {
	switch p {
	case "metadata.resourceVersion", "metadata.name", "metadata.namespace", "apiVersion", "kind", "metadata.uid":
		return true
	}
	return strings.HasPrefix(p, "metadata.managedFields") || strings.HasPrefix(p, "$")
}

func leafPaths(prefix expect.Path, m map[string]any, out *[]string) {
	for k, v := range m {
		p := append(slices.Clip(prefix), expect.Segment{Key: k, Index: -1})
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			leafPaths(p, sub, out)
			continue
		}
		*out = append(*out, p.String())
	}
}

// diffPaths are the field paths an update changes: where old and new
// differ, down to the first map that differs in a leaf or a list. An update
// of the main resource leaves status alone, and of status, everything else.
func diffPaths(old, new map[string]any, subresource string) []string {
	var out []string
	diffMaps(nil, old, new, &out)
	return slices.DeleteFunc(out, func(p string) bool {
		if ignoredPath(p) || strings.HasPrefix(p, "metadata.generation") || strings.HasPrefix(p, "metadata.creationTimestamp") {
			return true
		}
		inStatus := p == "status" || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[")
		return (subresource == "" && inStatus) || (subresource == "status" && !inStatus)
	})
}

func diffMaps(prefix expect.Path, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		p := append(slices.Clip(prefix), expect.Segment{Key: k, Index: -1})
		av, bv := a[k], b[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		// A map that appears or goes is compared with an empty one, so
		// the keys written are named, not the whole map.
		if aok && bv == nil {
			bm, bok = map[string]any{}, true
		}
		if bok && av == nil {
			am, aok = map[string]any{}, true
		}
		if aok && bok {
			diffMaps(p, am, bm, out)
			continue
		}
		if len(expect.Match(av, bv)) > 0 || len(expect.Match(bv, av)) > 0 {
			*out = append(*out, p.String())
		}
	}
}

// end is every object the observer holds, sorted by kind and name.
func (o *observer) end() []reports.EndObject {
	kindOf := map[string]string{}
	for _, k := range o.kinds {
		kindOf[k.gvr.Resource] = k.gvk.GroupVersion().String() + " " + k.gvk.Kind
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]reports.EndObject, 0, len(o.latest))
	for key, u := range o.latest {
		out = append(out, reports.EndObject{Kind: kindOf[key.resource], Name: key.name, Object: u.DeepCopy().Object})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
