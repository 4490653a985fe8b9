package explore

import (
	"fmt"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-lab/converge/scenarios/explore/internal/inputs"
)

// DefaultInputShrinkRuns bounds the candidates one input shrinking tries:
// each is an input point's run (its round trip, or its two or three runs
// apart when the round trip cannot stand for them).
const DefaultInputShrinkRuns = 12

// InputRun runs an input point (its round trip, or its runs apart) and
// judges it, as RoundTripOutcome or InputOutcome does.
type InputRun func(pt InputPoint) Outcome

// InputPointOf is the point of the changes cs made to the resource pt
// changes, as the references ended it, named id: a candidate of
// ShrinkInput. False when cs make no point (see InputPoints) or the server
// would refuse the resource they end with.
func (p *Plan) InputPointOf(pt InputPoint, cs []InputChange, id string) (InputPoint, bool) {
	if pt.Object < 0 || pt.Object >= len(p.Scenario.Objects) || len(p.References) == 0 || len(cs) == 0 {
		return InputPoint{}, false
	}
	manifest := map[string]any(runtime.DeepCopyJSON(p.Scenario.Objects[pt.Object].Manifest))
	apiVersion, _ := manifest["apiVersion"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return InputPoint{}, false
	}
	schemas, err := crdSchemas(p.Scenario)
	if err != nil {
		return InputPoint{}, false
	}
	sch := schemas[gv.WithKind(pt.Kind)]
	live := endObject(p.References[0], apiVersion+" "+pt.Kind, pt.Name)
	if sch == nil || live == nil {
		return InputPoint{}, false
	}
	out, ok := inputPoint(sch, live, manifest, cs)
	if !ok {
		return InputPoint{}, false
	}
	end := live
	for _, c := range cs {
		if end, err = inputs.Apply(end, c); err != nil {
			return InputPoint{}, false
		}
	}
	v, err := inputs.NewValidator(sch)
	if err != nil || v.Validate(end, live) != nil {
		return InputPoint{}, false
	}
	out.ID, out.Object, out.Kind, out.Name, out.At, out.Generation = id, pt.Object, pt.Kind, pt.Name, pt.At, pt.Generation
	if r := pt.Refused; r != nil && !slices.ContainsFunc(out.Writes, func(w InputWrite) bool { return w.Field == r.Write.Field }) {
		out.Refused = r
	}
	return out, true
}

// ShrinkInput reduces pt, whose outcome failed has differences, to a
// smaller point that still shows one of them (a difference of the same
// oracle, kind and field): first the fewest changes, dropping each in turn
// while the rest still fail; then the smallest values: each whole number a
// change sets, moved as close to the value it replaced as still fails (one
// step from it first, then by halves). It tries at most budget candidates (run runs each)
// and returns the smallest failing point, its outcome, and the candidates
// run. A point that cannot shrink comes back as it was, with failed.
func (p *Plan) ShrinkInput(pt InputPoint, failed Outcome, run InputRun, budget int) (InputPoint, Outcome, int) {
	want := map[string]bool{}
	for _, d := range failed.Differences {
		want[d.key()] = true
	}
	if len(want) == 0 {
		return pt, failed, 0
	}
	cur, out, runs := pt, failed, 0
	try := func(cs []InputChange) bool {
		if runs >= budget {
			return false
		}
		cand, ok := p.InputPointOf(pt, cs, fmt.Sprintf("%s-s%d", pt.ID, runs+1))
		if !ok {
			return false
		}
		cand.ShrunkFrom = pt.Signature()
		runs++
		o := run(cand)
		if o.Error != "" || !slices.ContainsFunc(o.Differences, func(d Difference) bool { return want[d.key()] }) {
			return false
		}
		cur, out = cand, o
		return true
	}
	// Fewer changes: a chain is 1-minimal when no change can go.
	for dropped := true; dropped && len(cur.Changes) > 1; {
		dropped = false
		for i := range cur.Changes {
			if try(slices.Delete(slices.Clone(cur.Changes), i, i+1)) {
				dropped = true
				break
			}
		}
	}
	// Smaller values: a whole number halfway back, while it still fails.
	for i := range cur.Changes {
		c := cur.Changes[i]
		if c.Op != inputs.OpSet {
			continue
		}
		hi, ok := whole(c.Value)
		if !ok {
			continue
		}
		lo, ok := p.wholeBefore(cur, i)
		if !ok {
			continue
		}
		// One step from the value it replaced first, the most common
		// answer; then halfway between what passed and what failed.
		step := int64(1)
		if hi < lo {
			step = -1
		}
		for next := lo + step; hi-lo > 1 || lo-hi > 1; next = lo + (hi-lo)/2 {
			cs := slices.Clone(cur.Changes)
			cs[i].Value, cs[i].Why = next, fmt.Sprintf("shrunk from %d", whole0(c.Value))
			if try(cs) {
				hi = next
			} else {
				if runs >= budget {
					break
				}
				lo = next
			}
		}
	}
	return cur, out, runs
}

// wholeBefore is the whole number at the path pt's i-th change sets, as
// the resource was before it: the references' end, with the changes before
// it made.
func (p *Plan) wholeBefore(pt InputPoint, i int) (int64, bool) {
	if len(p.References) == 0 || pt.Object < 0 || pt.Object >= len(p.Scenario.Objects) {
		return 0, false
	}
	apiVersion, _ := p.Scenario.Objects[pt.Object].Manifest["apiVersion"].(string)
	obj := endObject(p.References[0], apiVersion+" "+pt.Kind, pt.Name)
	if obj == nil {
		return 0, false
	}
	for _, c := range pt.Changes[:i] {
		var err error
		if obj, err = inputs.Apply(obj, c); err != nil {
			return 0, false
		}
	}
	v, ok := inputs.ValueAt(obj, pt.Changes[i].Path)
	if !ok {
		return 0, false
	}
	return whole(v)
}

// whole is v as a whole number, when it is one.
func whole(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

func whole0(v any) int64 {
	n, _ := whole(v)
	return n
}
