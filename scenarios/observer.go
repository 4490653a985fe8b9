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
// unfaulted client's informers. It records every change it sees in the
// history, the object with it: the invariants, the write rules and the
// goal are judged on that record (see judge.go and seen.go).
type observer struct {
	r          *run
	namespaced dynamicinformer.DynamicSharedInformerFactory
	cluster    dynamicinformer.DynamicSharedInformerFactory
	mu         sync.Mutex
	kinds      map[schema.GroupVersionKind]*kindInfo
	charts     []*charted
	stopCh     chan struct{}
}

type kindInfo struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
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

func newObserver(r *run) *observer {
	o := &observer{r: r, kinds: map[schema.GroupVersionKind]*kindInfo{}, stopCh: make(chan struct{})}
	o.namespaced = dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.kube.dynamic, 0, r.env.Namespace, nil)
	o.cluster = dynamicinformer.NewDynamicSharedInformerFactory(r.kube.dynamic, 0)
	o.charts = chartedFields(&r.s)
	return o
}

// compile compiles the scenario's invariants and goal.
func compile(s *Scenario) ([]compiledInvariant, []compiledExpectation, error) {
	var invs []compiledInvariant
	for _, inv := range s.Invariants {
		expr, err := compileRule(inv.Rule)
		if err != nil {
			return nil, nil, fmt.Errorf("invariant %s: %w", inv.Name, err)
		}
		sel, _ := labels.Parse(inv.Select.Labels)
		invs = append(invs, compiledInvariant{Invariant: inv, expr: expr, transition: expr.Transition(), sel: sel})
	}
	var goals []compiledExpectation
	for i, e := range s.Goal.Objects {
		c := compiledExpectation{Expectation: e}
		if e.Condition != "" {
			expr, err := expect.Compile(e.Condition, false)
			if err != nil {
				return nil, nil, fmt.Errorf("goal.objects[%d]: %w", i, err)
			}
			c.expr = expr
		}
		c.sel, _ = labels.Parse(e.Select.Labels)
		goals = append(goals, c)
	}
	return invs, goals, nil
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
		o.kinds[gvk] = k
		o.r.hist.watched(m.Resource.Resource, gvk)
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
	tombstone := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = t.Obj, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	kind := k.gvk.GroupVersion().String() + " " + k.gvk.Kind
	o.r.hist.event(reports.WatchEvent{At: now, Type: typ, Resource: k.gvr.Resource, Name: u.GetName(), RV: u.GetResourceVersion(),
		Kind: kind, Namespace: u.GetNamespace(), Object: recorded(u), Tombstone: tombstone})
	if typ != "DELETED" && len(o.charts) > 0 {
		o.r.hist.chart(o.charts, kind, u, now)
	}
}

func matches(name string, sel labels.Selector, u *unstructured.Unstructured) bool {
	return (name == "" || name == u.GetName()) && (sel == nil || sel.Matches(labels.Set(u.GetLabels())))
}

// goalHolds judges the scenario's expectations on the objects seen.
func goalHolds(goals []compiledExpectation, w *seen) (bool, string) {
	for i, e := range goals {
		objs := w.selected(e.Select)
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

// endObjects is every object seen at the end, sorted by kind and name.
func endObjects(w *seen) []reports.EndObject {
	out := make([]reports.EndObject, 0, len(w.latest))
	for key, obj := range w.latest {
		gvk := w.kinds[key.resource]
		out = append(out, reports.EndObject{Kind: gvk.GroupVersion().String() + " " + gvk.Kind, Name: key.name, Object: obj})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
