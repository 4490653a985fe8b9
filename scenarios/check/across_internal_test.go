package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// The observer's watch of the parents broke (an API server restart) and
// listed again later: the parent's changes in between reached the history
// as the relist's one event. The child changed meanwhile, and at its
// version the parent was already changed too; judged there, the rule would
// read the parent as it was before the gap beside the child as it was
// after, and break. Not judged in the gap, it holds; without the gap
// recorded, the same history breaks it (the judge's false alarm this
// guards against). A gap after which the parents did not change missed
// nothing, and a rule broken after the relist is still found.
func TestARuleAcrossKindsIsNotJudgedWhereAWatchHadAGap(t *testing.T) {
	parent := func(rv string, gen, observed int64) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Parent", "metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": rv,
			"generation": gen}, "status": map[string]any{"observedGeneration": observed, "ready": true}}
	}
	child := func(rv string, gen, observed int64) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Child", "metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": rv,
			"generation": gen}, "status": map[string]any{"observedGeneration": observed}}
	}
	event := func(at time.Duration, resource, kind, rv string, obj map[string]any) reports.WatchEvent {
		return reports.WatchEvent{At: t0.Add(at), Type: "MODIFIED", Resource: resource, Kind: "v1 " + kind, Namespace: "ns", Name: "p", RV: rv, Object: obj}
	}
	// The parent ready at generation 1 says its child has observed its own.
	rule := "!(object.status.ready && object.status.observedGeneration == object.metadata.generation) || " +
		"objects.Child.all(c, c.status.observedGeneration == c.metadata.generation)"
	history := func(gaps []reports.Gap, last, child22 map[string]any) *reports.History {
		return &reports.History{Start: t0, Resources: map[string]string{"parents": "v1 Parent", "children": "v1 Child"}, Gaps: gaps,
			Events: []reports.WatchEvent{
				event(0, "parents", "Parent", "10", parent("10", 1, 1)),
				event(0, "children", "Child", "11", child("11", 1, 1)),
				// Unseen: the parent moved to generation 2 at 20, not ready.
				event(3*time.Second, "children", "Child", "21", child("21", 2, 1)), // the child's new spec
				event(4*time.Second, "children", "Child", "22", child22),
				event(5*time.Second, "parents", "Parent", "23", last), // the relist
			}}
	}
	broken := func(h *reports.History) []string {
		c, err := Compile(Rules{Invariants: []Invariant{{Name: "ready-child", Select: Selector{APIVersion: "v1", Kind: "Parent"}, Rule: rule}}})
		require.NoError(t, err)
		var out []string
		for _, f := range c.Judge(h, nil).Findings {
			if f.Check == "ready-child" {
				out = append(out, f.Detail)
			}
		}
		return out
	}
	gap := []reports.Gap{{At: t0.Add(time.Second), Resource: "parents", Error: "too old resource version"}}
	settled := child("22", 2, 2)
	assert.Empty(t, broken(history(gap, parent("23", 2, 2), settled)), "not judged at 21, in the parents' gap")
	assert.NotEmpty(t, broken(history(nil, parent("23", 2, 2), settled)), "the same history without its gap: judged at 21 from the parent of 10")
	assert.NotEmpty(t, broken(history(gap, parent("23", 2, 2), child("22", 2, 1))),
		"at 23 the relisted parent is known again, and breaks the rule against a child that has not observed its spec")
	late := []reports.Gap{{At: t0.Add(6 * time.Second), Resource: "parents"}}
	assert.NotEmpty(t, broken(history(late, parent("23", 2, 2), settled)), "a gap after which the parents did not change hides nothing before it")
}
