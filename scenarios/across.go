package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-lab/converge/scenarios/expect"
)

// maxJudgedAcross bounds the instants at which invariants across objects
// are judged in one run: each costs a list per kind they read.
const maxJudgedAcross = 100_000

// judgeAcross judges the invariants across objects at resourceVersion rv,
// once per rv: every kind they read is listed as it was at exactly rv, so
// the objects of different kinds are seen at one instant, whatever order
// the informers of those kinds delivered their events in. Each change the
// observer sees is such an instant, and between two of them nothing a
// rule reads changed.
func (o *observer) judgeAcross(rv string, now time.Time) {
	if rv == "" {
		return
	}
	o.judgedMu.Lock()
	if o.judged == nil {
		o.judged = map[string]bool{}
	}
	if o.judged[rv] || len(o.judged) >= maxJudgedAcross {
		o.judgedMu.Unlock()
		return
	}
	o.judged[rv] = true
	o.judgedMu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objects := map[string]any{}
	for _, kind := range o.across {
		if _, done := objects[kind]; done {
			continue
		}
		k := o.kindNamed(kind)
		if k == nil {
			// Not watched yet (a kind of the scenario's CRDs, before they
			// are in): an empty list would claim there are none of it.
			return
		}
		ri := o.r.kube.dynamic.Resource(k.gvr)
		list, err := ri.Namespace(o.r.env.Namespace).List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !k.namespaced {
			list, err = ri.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		}
		if err != nil {
			// Compacted away, or the API server restarting: this instant
			// goes unjudged, and the log says so for the first few.
			o.judgedMu.Lock()
			o.unjudged++
			n := o.unjudged
			o.judgedMu.Unlock()
			if n <= 3 {
				o.r.hist.log(now, fmt.Sprintf("invariants across objects not judged at resourceVersion %s: %v", rv, err))
			}
			return
		}
		items := make([]any, 0, len(list.Items))
		for i := range list.Items {
			items = append(items, list.Items[i].Object)
		}
		objects[kind] = items
	}
	for _, inv := range o.invariants {
		if !inv.expr.Across() {
			continue
		}
		items, _ := objects[inv.Select.Kind].([]any)
		for _, it := range items {
			obj, _ := it.(map[string]any)
			u := &unstructured.Unstructured{Object: obj}
			if u.GetAPIVersion() != inv.Select.APIVersion || !matches(inv.Select.Name, inv.sel, u) {
				continue
			}
			held, err := inv.expr.EvalAcross(obj, objects)
			switch {
			case errors.Is(err, expect.ErrMissing):
			case err != nil:
				o.r.hist.find(finding(InvRuleError, now, objectSubject(u), nil, fmt.Sprintf("invariant %s on %s %s: %v", inv.Name, inv.Select.Kind, u.GetName(), err)))
			case !held:
				o.r.hist.find(finding(inv.Name, now, objectSubject(u), nil, fmt.Sprintf("%s %s at resourceVersion %s, with the objects of %v as they were then: %s is false",
					inv.Select.Kind, u.GetName(), rv, slices.Compact(slices.Sorted(slices.Values(o.across))), inv.Rule)))
			}
		}
	}
}

// kindNamed is the watched kind of that name.
func (o *observer) kindNamed(kind string) *kindInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	for gvk, k := range o.kinds {
		if gvk.Kind == kind {
			return k
		}
	}
	return nil
}

// acrossCounts says at how many instants the invariants across objects
// were to be judged, and at how many of them they could not be.
func (o *observer) acrossCounts() (instants, unjudged int) {
	o.judgedMu.Lock()
	defer o.judgedMu.Unlock()
	return len(o.judged), o.unjudged
}
