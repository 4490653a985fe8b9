package check

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

func invariants() Check {
	return Check{
		Name: "invariants", Kind: reports.KindInvariant,
		Catches: "a scenario's invariant (a CEL rule over `object`, and `oldObject` for a transition rule) false of a version of an object it selects; each finding is named after its invariant.",
		Reads:   "every object the observer saw with its event, in the order seen (History.Events)",
		judge:   judgeInvariants,
	}
}

// judgeInvariants judges each invariant on one object on every version of
// it the observer saw (a transition rule on each change, against the one
// before). A field not there says nothing of that version.
func judgeInvariants(j *judging) {
	var own []compiledInvariant
	for _, inv := range j.c.invariants {
		if !inv.expr.Across() {
			own = append(own, inv)
		}
	}
	if len(own) == 0 {
		return
	}
	prev := map[objectKey]map[string]any{}
	for _, e := range j.h.Events {
		if e.Object == nil {
			continue
		}
		key := objectKey{e.Resource, e.Namespace, e.Name}
		old := prev[key]
		if e.Type == "DELETED" {
			delete(prev, key)
			continue
		}
		prev[key] = e.Object
		gvk := parseKind(e.Kind)
		u := &unstructured.Unstructured{Object: e.Object}
		for _, inv := range own {
			if inv.Select.APIVersion != gvk.GroupVersion().String() || inv.Select.Kind != gvk.Kind || !Matches(inv.Select.Name, inv.sel, u) {
				continue
			}
			if inv.transition && old == nil {
				continue
			}
			held, err := inv.expr.Eval(e.Object, old)
			j.judged(inv, e.At, gvk.Kind, u, held, err, func() string {
				return fmt.Sprintf("%s %s (resourceVersion %s): %s is false%s", gvk.Kind, e.Name, e.RV, inv.Rule, read(inv.expr.Explain(e.Object, old, nil)))
			})
		}
	}
}

// judged records what evaluating inv on u said: nothing when it held or
// read a field that is not there, invariant-evaluates when it could not
// be evaluated, else the invariant's finding with falseDetail's.
func (j *judging) judged(inv compiledInvariant, at time.Time, kind string, u *unstructured.Unstructured, held bool, err error, falseDetail func() string) {
	j.selected[inv.Name] = true
	j.evaluated[inv.Name] = j.evaluated[inv.Name] || err == nil
	switch {
	case errors.Is(err, expect.ErrMissing):
	case err != nil:
		j.find(Finding(InvariantEvaluates, at, ObjectSubject(u), nil, fmt.Sprintf("invariant %s on %s %s: %v", inv.Name, kind, u.GetName(), err)))
	case !held:
		j.find(Finding(inv.Name, at, ObjectSubject(u), nil, falseDetail()))
	}
}

// read is what a false rule read, as the end of its finding's detail.
func read(explained string) string {
	if explained == "" {
		return ""
	}
	return " (it read " + explained + ")"
}
