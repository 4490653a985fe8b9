package explore

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/explore/internal/inputs"
)

// An InputChange is one change of a custom resource's spec: where, what,
// and why the schema suggests it.
type InputChange = inputs.Change

// InputRules are a user's say over the input changes: paths pinned or
// excluded, and values to try.
type InputRules = inputs.Rules

// An InputPoint is one change of the desired state a scenario creates, or
// a chain of two or three made one after another: changes to the spec of
// one of its custom resources, drawn from its CRD's schema and the spec the
// references ended with, the first made once every reference has
// converged. Its transition run (Transition) makes the changes in the run,
// each writing the one field under spec it is in; its fresh run (Fresh)
// creates the resource with the changes made to its manifest, the
// scenario's interference then doing what it did in the references. A
// correct controller ends both alike (Inconsistent).
type InputPoint struct {
	// ID names the point in reports and file names: "i007".
	ID string `json:"id"`
	// Object is the index, in the scenario's objects, of the resource
	// changed; Kind and Name name it.
	Object int    `json:"object"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	// Changes are made one after another, At apart, the first at At: a
	// chain is a user who edits the resource again once the controller
	// had the time to act on the edit before.
	Changes []InputChange `json:"changes"`
	// Writes are the run's writes of them, one per change: the field
	// directly under spec the change is in, as the changes so far left it.
	Writes []InputWrite `json:"writes"`
	// Back are the writes that undo them (Recovery): each field they
	// touched, as the references ended it.
	Back []InputWrite `json:"back"`
	// Spec is the manifest's spec with the changes made: the fresh run's.
	Spec map[string]any `json:"spec"`
	// At is when the transition run makes the first change, from the
	// run's start, and how long after it makes each next one;
	// Generation is the resource's generation the references ended with,
	// which each change moves on.
	At         reports.Duration `json:"at"`
	Generation int64            `json:"generation"`
	// Refused is a change of the resource the schema refuses, of a field
	// the changes leave alone, that the transition run sends before its
	// last change: the server must refuse it, and the controller, which
	// never sees it, must end as if it had not been sent. Nil when the
	// schema refuses nothing drawn.
	Refused *InputRefusal `json:"refused,omitempty"`
	// ShrunkFrom is the signature of the point this one was shrunk from
	// (ShrinkInput); empty for a point of the plan.
	ShrunkFrom string `json:"shrunkFrom,omitempty"`
}

// An InputRefusal is a change the schema refuses and the write that
// sends it.
type InputRefusal struct {
	Change InputChange `json:"change"`
	Write  InputWrite  `json:"write"`
}

// An InputWrite is one write of an input point's run: a field directly
// under spec set to Value, or removed.
type InputWrite struct {
	Field   string `json:"field"`
	Value   any    `json:"value,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

// writeOf is the write that makes spec.field of obj what it is in obj.
func writeOf(obj map[string]any, field string) InputWrite {
	spec, _ := obj["spec"].(map[string]any)
	if v, ok := spec[field]; ok {
		return InputWrite{Field: field, Value: runtime.DeepCopyJSONValue(v)}
	}
	return InputWrite{Field: field, Removed: true}
}

// interference is w made at, once, to the object sel selects: a JSON
// patch, which has no precondition, so that neither the controller's
// writes nor another of the point's writes at the same instant make it
// meet a conflict and skip the change (a set would).
func (w InputWrite) interference(sel scenarios.Selector, at reports.Duration) scenarios.Interference {
	op := map[string]any{"op": "add", "path": "/spec/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(w.Field)}
	if w.Removed {
		op["op"] = "remove"
	} else {
		op["value"] = runtime.DeepCopyJSONValue(w.Value)
	}
	return scenarios.Interference{Every: at, Until: at, Count: 1, Select: sel,
		Patch: &scenarios.PatchStep{Type: scenarios.JSONPatch, Patch: []any{op}}}
}

// Signature is what the point changes: "WebApp shop: spec.replicas set 0
// (its minimum)".
func (pt InputPoint) Signature() string {
	var parts []string
	for _, c := range pt.Changes {
		parts = append(parts, c.String())
	}
	return fmt.Sprintf("%s %s: %s", pt.Kind, pt.Name, strings.Join(parts, ", then "))
}

// InputPoints are the input points of s: for each custom resource s
// creates once whose CRD s also creates, the changes its schema allows at
// spec (rules pin, exclude or add values), drawn from the resource as the
// first reference ended it, each a point of one change, made after the
// latest time a reference converged. A change the manifest cannot take
// (a field the server defaulted, removed) makes no point. The references
// must have converged, with their end state (Options.EndState).
func InputPoints(s *scenarios.Scenario, refs []*reports.Result, rules InputRules) ([]InputPoint, error) {
	if len(refs) == 0 {
		return nil, errors.New("input points are drawn from the references' end: none given")
	}
	var at time.Duration
	for i, r := range refs {
		if !r.Converged {
			return nil, fmt.Errorf("reference run %d (seed %d) did not converge: input points start from a converged world", i+1, r.Seed)
		}
		at = max(at, time.Duration(r.TimeToConverge))
	}
	// On the goal's grid, after the settle window began.
	at = at.Truncate(scenarios.Poll) + scenarios.Poll
	schemas, err := crdSchemas(s)
	if err != nil {
		return nil, err
	}
	var out []InputPoint
	for i, o := range s.Objects {
		if o.Manifest == nil || o.Count > 1 {
			continue
		}
		manifest := map[string]any(runtime.DeepCopyJSON(o.Manifest))
		apiVersion, _ := manifest["apiVersion"].(string)
		kind, _ := manifest["kind"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			continue
		}
		sch, ok := schemas[gv.WithKind(kind)]
		if !ok {
			continue
		}
		md, _ := manifest["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		live := endObject(refs[0], apiVersion+" "+kind, name)
		if live == nil {
			continue // deleted in the run: nothing to change
		}
		if _, ok := live["spec"].(map[string]any); !ok {
			continue
		}
		owned, whole := interfered(s, apiVersion, kind, name)
		if whole {
			continue // another actor patches it in ways not told apart
		}
		r := rules
		r.Exclude = append(slices.Clone(rules.Exclude), owned...)
		changes, err := inputs.Changes(sch, live, "spec", r, nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
		generation := endGeneration(refs, apiVersion+" "+kind, name)
		first := len(out)
		add := func(cs []InputChange) bool {
			pt, ok := inputPoint(sch, live, manifest, cs)
			if !ok {
				return false
			}
			pt.ID, pt.Object, pt.Kind, pt.Name = fmt.Sprintf("i%03d", len(out)+1), i, kind, name
			pt.At, pt.Generation = reports.Duration(at), generation
			out = append(out, pt)
			return true
		}
		var singles []InputChange
		var refusals []InputRefusal
		for _, c := range changes {
			if c.Invalid {
				if r, ok := refusal(sch, live, c); ok {
					refusals = append(refusals, r)
				}
				continue
			}
			if add([]InputChange{c}) {
				singles = append(singles, c)
			}
		}
		n := rules.Chains
		if n == 0 {
			n = len(singles)
		}
		for _, cs := range chains(live, singles, n) {
			add(cs)
		}
		// One refused change a run, each in turn.
		for k := first; k < len(out) && len(refusals) > 0; k++ {
			out[k].Refused = pickRefusal(out[k], refusals, k-first)
		}
	}
	return out, nil
}

// refusal is invalid change c of live as a write of the field under spec
// it is in; false when no write can send it (a name a JSON pointer of the
// field cannot hold, or a change the server's defaults undo).
func refusal(sch *structuralschema.Structural, live map[string]any, c InputChange) (InputRefusal, bool) {
	field, err := inputs.FieldUnder("spec", c.Path)
	if err != nil || strings.ContainsAny(field, ".[]\"\\") {
		return InputRefusal{}, false
	}
	changed, err := inputs.Apply(live, c)
	if err != nil || inputs.NoOp(sch, live, changed) {
		return InputRefusal{}, false
	}
	return InputRefusal{Change: c, Write: writeOf(changed, field)}, true
}

// pickRefusal is the k-th of refusals, or the first after it, whose
// field pt's changes leave alone; nil when each is of a field they touch.
func pickRefusal(pt InputPoint, refusals []InputRefusal, k int) *InputRefusal {
	for i := range refusals {
		r := refusals[(k+i)%len(refusals)]
		if !slices.ContainsFunc(pt.Writes, func(w InputWrite) bool { return w.Field == r.Write.Field }) {
			return &r
		}
	}
	return nil
}

// chains are at most n chains of two or three of the changes cs of live
// that compose (inputs.Chains), spread over cs rather than all beginning
// with its first: the composable chains in an order of their own (a hash
// of what they change, so that the same changes draw the same chains),
// two thirds pairs. Each still has to make a point (inputPoint).
func chains(live map[string]any, cs []InputChange, n int) [][]InputChange {
	if n <= 0 || len(cs) < 2 {
		return nil
	}
	all := inputs.Chains(live, cs, 3, 20*n)
	key := func(c []InputChange) uint64 {
		h := fnv.New64a()
		for _, x := range c {
			fmt.Fprintf(h, "%s\x00", x)
		}
		return h.Sum64()
	}
	slices.SortStableFunc(all, func(a, b []InputChange) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(key(a), key(b)))
	})
	pairs := slices.IndexFunc(all, func(c []InputChange) bool { return len(c) > 2 })
	if pairs < 0 {
		pairs = len(all)
	}
	take := min(pairs, n-n/3)
	out := all[:take:take]
	out = append(out, all[pairs:min(len(all), pairs+n-take)]...)
	return out
}

// interfered are the fields under spec of the named resource that the
// scenario's interference writes (spec.config): another actor's in the
// run, whose writes would undo a change there in one run and not in the
// other, so no change is drawn under them. whole: an interference
// patches it otherwise than by a merge patch of spec's fields.
func interfered(s *scenarios.Scenario, apiVersion, kind, name string) (owned []string, whole bool) {
	for _, in := range s.World.Interference {
		sel := in.Select
		if sel.APIVersion != apiVersion || sel.Kind != kind || sel.Name != "" && sel.Name != name {
			continue
		}
		if in.Set != nil {
			if field, err := inputs.FieldUnder("spec", in.Set.Path); err == nil {
				owned = append(owned, "spec."+field)
			} else if in.Set.Path == "spec" {
				return nil, true
			}
		}
		if p := in.Patch; p != nil && p.Subresource == "" {
			body, _ := p.Patch.(map[string]any)
			spec, ok := body["spec"].(map[string]any)
			if p.Type != "" && p.Type != scenarios.MergePatch || body == nil || body["spec"] != nil && !ok {
				return nil, true
			}
			for field := range spec {
				owned = append(owned, "spec."+field)
			}
		}
	}
	slices.Sort(owned)
	return slices.Compact(owned), false
}

// inputPoint is the point of the changes cs of live, the resource as the
// references ended it, whose manifest is manifest; false when they cannot
// be made to both, when one of them writes nothing the server would store
// (its defaults undo it), or, for a chain, when the server would refuse a
// step of it (a rule across fields that each change keeps alone).
func inputPoint(sch *structuralschema.Structural, live, manifest map[string]any, cs []InputChange) (InputPoint, bool) {
	var validator *inputs.Validator
	if len(cs) > 1 {
		var err error
		if validator, err = inputs.NewValidator(sch); err != nil {
			return InputPoint{}, false
		}
	}
	pt := InputPoint{Changes: cs}
	state, fresh := live, manifest
	var touched []string
	for _, c := range cs {
		field, err := inputs.FieldUnder("spec", c.Path)
		if err != nil || strings.ContainsAny(field, ".[]\"\\") {
			return InputPoint{}, false // a name an interference's dotted path cannot write
		}
		next, err := inputs.Apply(state, c)
		if err != nil || inputs.NoOp(sch, state, next) {
			return InputPoint{}, false
		}
		if validator != nil && validator.Validate(next, state) != nil {
			return InputPoint{}, false
		}
		if fresh, err = inputs.Apply(fresh, c); err != nil {
			return InputPoint{}, false
		}
		pt.Writes = append(pt.Writes, writeOf(next, field))
		if !slices.Contains(touched, field) {
			touched = append(touched, field)
		}
		state = next
	}
	for _, field := range touched {
		pt.Back = append(pt.Back, writeOf(live, field))
	}
	pt.Spec, _ = fresh["spec"].(map[string]any)
	return pt, true
}

// endObject is the object r ended with, of kind (as the history writes
// it) and name; nil when r did not end with it.
func endObject(r *reports.Result, kind, name string) map[string]any {
	for _, o := range r.History.End {
		if o.Kind == kind && o.Name == name {
			return runtime.DeepCopyJSON(o.Object)
		}
	}
	return nil
}

// endGeneration is the latest generation the references ended the
// object with (kind as the history writes it: "apps/v1 Deployment"); 1
// when none did.
func endGeneration(refs []*reports.Result, kind, name string) int64 {
	out := int64(1)
	for _, r := range refs {
		for _, o := range r.History.End {
			if o.Kind != kind || o.Name != name {
				continue
			}
			md, _ := o.Object["metadata"].(map[string]any)
			switch g := md["generation"].(type) {
			case int64:
				out = max(out, g)
			case float64:
				out = max(out, int64(g))
			}
		}
	}
	return out
}

// crdSchemas are the structural schemas of the CRDs s creates, by the
// kind of each served version.
func crdSchemas(s *scenarios.Scenario) (map[schema.GroupVersionKind]*structuralschema.Structural, error) {
	out := map[schema.GroupVersionKind]*structuralschema.Structural{}
	for _, o := range s.Objects {
		if o.Manifest == nil || o.Manifest["kind"] != "CustomResourceDefinition" || o.Manifest["apiVersion"] != apiextensionsv1.SchemeGroupVersion.String() {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(o.Manifest), &crd); err != nil {
			return nil, fmt.Errorf("reading CRD %v: %w", o.Manifest["metadata"], err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			sch, err := inputs.SchemaOf(&crd, v.Name)
			if err != nil {
				return nil, err
			}
			out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = sch
		}
	}
	return out, nil
}

// Transition is the scenario that runs pt: s, with the resource's spec
// changed as pt's writes say, the first at pt.At and each next one pt.At
// after it. Its goal is one no input can make wrong: the changes were made
// (the resource's generation moved past pt.Generation once per change) and
// the controller then went quiet for the settle window; the scenario's own
// goal, written for its input, is not judged. The deadline moves on by the
// time of the last change.
func (pt InputPoint) Transition(s *scenarios.Scenario) *scenarios.Scenario {
	out := pt.base(s, "after")
	sel := pt.selector(s)
	out.World.Interference = slices.Clone(s.World.Interference)
	for i, w := range pt.Writes {
		out.World.Interference = append(out.World.Interference, w.interference(sel, pt.At*reports.Duration(i+1)))
	}
	if r := pt.Refused; r != nil {
		// Half way to the last change: the run cannot have ended.
		in := r.Write.interference(sel, pt.At*reports.Duration(len(pt.Writes))-pt.At/2)
		in.Refused = true
		out.World.Interference = append(out.World.Interference, in)
	}
	out.Goal = generationPast(sel, pt.Generation+int64(len(pt.Writes))-1)
	out.Timing.Deadline = cmp.Or(s.Timing.Deadline, reports.Duration(scenarios.DefaultDeadline)) + pt.At*reports.Duration(len(pt.Writes))
	return out
}

// Recovery is the scenario that changes the resource as Transition does
// and, once the controller had the time to act on the last change
// (backAfter), writes each field back as the references ended it: a
// correct controller ends as the references did. Its goal: every change
// and every write back made (the generation moved on for each), then
// quiet. Until its writes back it is the transition run, and stands for
// it when the controller had gone quiet by then (Plan.TransitionOf).
func (pt InputPoint) Recovery(s *scenarios.Scenario) *scenarios.Scenario {
	out := pt.Transition(s)
	out.Name = pointName(s.Name, pt.ID+"-back")
	out.Description = fmt.Sprintf("%s, changes of its input and back: %s", s.Name, pt.Signature())
	sel := pt.selector(s)
	back := pt.backAfter(s)
	at := pt.At*reports.Duration(len(pt.Writes)) + back
	for _, w := range pt.Back {
		out.World.Interference = append(out.World.Interference, w.interference(sel, at))
	}
	out.Goal = generationPast(sel, pt.Generation+int64(len(pt.Writes)+len(pt.Back))-1)
	out.Timing.Deadline += back
	return out
}

// backAfter is how long after the last change the recovery run writes
// back: as long as the references took to converge (pt.At), and at least
// the settle window and a poll, so that a controller that went quiet
// after the change has stood still for a settle window by then, as the
// transition run ends once it has.
func (pt InputPoint) backAfter(s *scenarios.Scenario) reports.Duration {
	return max(pt.At, reports.Duration(settleOf(s)+scenarios.Poll))
}

// settleOf is s's settle window, its default when s sets none.
func settleOf(s *scenarios.Scenario) time.Duration {
	return time.Duration(cmp.Or(s.Timing.Settle, scenarios.Duration(30*time.Second)))
}

// TransitionOf is pt's transition run as its recovery run holds it: the
// recovery run's history and objects just before its first write back,
// when every change had been made by then and the controller (and any
// other the scenario runs) had written nothing for the settle window
// before it, the point at which the transition run would have ended. The
// result has no verdict of its own: the recovery run's covers it. ok is
// false when the recovery run did not stand still before writing back, or
// did not write back: the transition run is then run on its own.
func (p *Plan) TransitionOf(pt InputPoint, recovery *reports.Result) (*reports.Result, bool) {
	if recovery == nil || recovery.Error != "" || len(pt.Back) == 0 {
		return nil, false
	}
	s := p.Scenario
	back := recovery.History.Start.Add(time.Duration(pt.At*reports.Duration(len(pt.Writes)) + pt.backAfter(s)))
	// The writes back are the recovery scenario's last interferences.
	own := len(s.World.Interference)
	first := own + len(pt.Writes)
	if pt.Refused != nil {
		first++
	}
	log := recovery.History.Log
	if made(log, first, first+len(pt.Back), back, back) == 0 || made(log, own, own+len(pt.Writes), time.Time{}, back.Add(-1)) != len(pt.Writes) {
		return nil, false
	}
	return standing(recovery, back, settleOf(s))
}

// made counts the writes of the interfering actors numbered from from to
// to (not included) that the log tells were made between at and until,
// both included (a zero at: from the start).
func made(log []reports.Entry, from, to int, at, until time.Time) int {
	count := 0
	for _, e := range log {
		if n, ok := interferenceOf(e.What); ok && n >= from && n < to && !e.At.Before(at) && !e.At.After(until) {
			count++
		}
	}
	return count
}

// standing is r's run as it stood just before at: its history before at
// and the objects it held, when no controller's write succeeded within
// settle before at (the run had gone quiet, as one ends); false when one
// did. The result has no verdict of its own: r's covers it.
func standing(r *reports.Result, at time.Time, settle time.Duration) (*reports.Result, bool) {
	h := r.History
	quietFrom := at.Add(-settle)
	var requests []reports.Request
	for _, q := range h.Requests {
		if !q.At.Before(at) {
			continue
		}
		if !q.At.Before(quietFrom) && check.SuccessfulWrite(q) {
			return nil, false
		}
		requests = append(requests, q)
	}
	n := sort.Search(len(h.Events), func(i int) bool { return !h.Events[i].At.Before(at) })
	seen := check.NewSeen(h.Resources)
	seen.UpTo(h.Events, n)
	out := &reports.Result{Scenario: r.Scenario, Seed: r.Seed, Backend: r.Backend, Pass: true, Converged: true,
		Started: r.Started, Replay: r.Replay}
	out.History = reports.History{Start: h.Start, Requests: requests, Events: h.Events[:n], Resources: h.Resources, End: seen.End()}
	return out, true
}

// RoundTrip is the scenario that stands for pt's fresh, recovery and
// transition runs in one run: the resource created as pt changes it
// (Fresh); once the controller had the time to act on it, each field pt
// touches written back as the references ended it (pt.Back), which a
// correct controller ends as the references did; once it had the time to
// act on that, pt's changes made again, as Transition makes them, which
// it ends as it ended the resource created with them. RoundTripOf reads
// the run at each of these instants. Its goal: every write back and
// every change made (the generation moved on for each, from where the
// references ended it), then quiet.
func (pt InputPoint) RoundTrip(s *scenarios.Scenario) *scenarios.Scenario {
	out := pt.Fresh(s)
	out.Name = pointName(s.Name, pt.ID+"-round")
	out.Description = fmt.Sprintf("%s, created with changes of its input, changed back, then changed again: %s", s.Name, pt.Signature())
	sel := pt.selector(s)
	back, first := pt.roundTimes(s)
	out.World.Interference = slices.Clone(s.World.Interference)
	for _, w := range pt.Back {
		out.World.Interference = append(out.World.Interference, w.interference(sel, back))
	}
	last := first + pt.At*reports.Duration(len(pt.Writes)-1)
	for i, w := range pt.Writes {
		out.World.Interference = append(out.World.Interference, w.interference(sel, first+pt.At*reports.Duration(i)))
	}
	if r := pt.Refused; r != nil {
		// Half a step before the last change, as Transition sends it.
		in := r.Write.interference(sel, last-pt.At/2)
		in.Refused = true
		out.World.Interference = append(out.World.Interference, in)
	}
	out.Goal = generationPast(sel, pt.Generation+int64(len(pt.Back)+len(pt.Writes))-1)
	out.Timing.Deadline = cmp.Or(s.Timing.Deadline, reports.Duration(scenarios.DefaultDeadline)) + last
	return out
}

// roundTimes are when pt's round trip writes back, from the run's start,
// and when it makes its first change: each as long after the step before
// it as the recovery run waits after its last change (backAfter), the
// creation taken as a change made when the references converged (pt.At).
func (pt InputPoint) roundTimes(s *scenarios.Scenario) (back, first reports.Duration) {
	back = pt.At + pt.backAfter(s)
	return back, back + pt.backAfter(s)
}

// RoundTripOf reads pt's round trip run (RoundTrip) as the runs it stands
// for: fresh, the run as it stood just before its writes back, as the
// fresh run ends; recovered, just before its first change, as a run
// changed back to the scenario's input ends; the run itself ends as the
// transition run does. ok is false when the run cannot stand for them: it
// failed to run, missed a write back or a change (its goal, counted from
// the references' generation, held before them), or had not gone quiet
// for the settle window before one of the two instants. The fresh,
// recovery and transition runs are then run on their own.
func (p *Plan) RoundTripOf(pt InputPoint, round *reports.Result) (fresh, recovered *reports.Result, ok bool) {
	if round == nil || round.Error != "" || len(pt.Back) == 0 {
		return nil, nil, false
	}
	s := p.Scenario
	back, first := pt.roundTimes(s)
	start := round.History.Start
	backAt, firstAt, end := start.Add(time.Duration(back)), start.Add(time.Duration(first)), start.Add(time.Duration(round.Simulated))
	own := len(s.World.Interference)
	changes := own + len(pt.Back)
	log := round.History.Log
	if made(log, own, changes, backAt, backAt) != len(pt.Back) || made(log, changes, changes+len(pt.Writes), firstAt, end) != len(pt.Writes) {
		return nil, nil, false
	}
	if fresh, ok = standing(round, backAt, settleOf(s)); !ok {
		return nil, nil, false
	}
	if recovered, ok = standing(round, firstAt, settleOf(s)); !ok {
		return nil, nil, false
	}
	return fresh, recovered, true
}

// RoundTripOutcome judges pt by its round trip run, as InputOutcome does
// by the runs it stands for (RoundTripOf): by its verdict; by whether it
// ended as it stood before its writes back, on the objects the controller
// wrote (Inconsistent); and by whether it stood before its first change as
// the references ended (Recovered). file is its result file. ok is false
// when it cannot stand for them: run them, and judge them by InputOutcome.
func (p *Plan) RoundTripOutcome(pt InputPoint, round *reports.Result, file string) (Outcome, bool) {
	fresh, recovered, ok := p.RoundTripOf(pt, round)
	if !ok {
		return Outcome{}, false
	}
	o := Outcome{Point: pt.Point(), Result: file, Replay: round.Replay, Fired: true, Wall: round.Wall}
	o.Differences = verdictDifferences(round)
	o.Differences = append(o.Differences, Inconsistent(pt, round, fresh, p.Masks)...)
	o.Differences = append(o.Differences, p.recovered(pt, recovered, "created with "+pt.Signature()+", then changed back")...)
	o.Differences = dedupe(o.Differences)
	return o, true
}

// interferenceOf reads the index of the interfering actor whose write a
// log entry tells of ("interference 3: json patch of ..."), and whether it
// tells of one made (not skipped, not unanswered).
func interferenceOf(what string) (int, bool) {
	rest, ok := strings.CutPrefix(what, "interference ")
	if !ok {
		return 0, false
	}
	num, did, ok := strings.Cut(rest, ": ")
	if !ok || strings.HasPrefix(did, "could not ") {
		return 0, false // skipped, or not made
	}
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// generationPast is the goal that the object sel selects has a
// generation past g.
func generationPast(sel scenarios.Selector, g int64) scenarios.Goal {
	return scenarios.Goal{Objects: []scenarios.Expectation{{Select: sel, Condition: fmt.Sprintf("object.metadata.generation > %d", g)}}}
}

// Recovered compares the end of pt's recovery run with the references',
// beyond p's masks, on the objects the controller wrote and the changed
// resource: what a change and its undoing left behind.
func (p *Plan) Recovered(pt InputPoint, recovery *reports.Result) []Difference {
	return p.recovered(pt, recovery, "after "+pt.Signature()+" and back")
}

// recovered is Recovered, each difference's detail beginning with how:
// what was done to the resource.
func (p *Plan) recovered(pt InputPoint, recovery *reports.Result, how string) []Difference {
	written := writtenBy(recovery)
	resources := map[string]string{}
	for kind, res := range resourcesOf(recovery) {
		resources[shortKind(kind)] = base(res)
	}
	var out []Difference
	for _, d := range p.endDifferences(recovery) {
		if d.Kind == pt.Kind && d.Object == pt.Name || written[resources[d.Kind]+"/"+d.Object] {
			d.Oracle = OracleRecovery
			d.Detail = how + ": " + d.Detail
			out = append(out, d)
		}
	}
	return dedupe(out)
}

// Fresh is the scenario that creates the resource as pt changes it, from
// the start: what its transition run must end like. Its goal: the
// controller went quiet for the settle window.
func (pt InputPoint) Fresh(s *scenarios.Scenario) *scenarios.Scenario {
	out := pt.base(s, "fresh")
	out.Objects = slices.Clone(s.Objects)
	obj := runtime.DeepCopyJSON(s.Objects[pt.Object].Manifest)
	obj["spec"] = runtime.DeepCopyJSONValue(pt.Spec)
	out.Objects[pt.Object].Manifest = obj
	out.Goal = scenarios.Goal{Objects: []scenarios.Expectation{{Select: pt.selector(s), Condition: "has(object.metadata.uid)"}}}
	return out
}

// selector selects pt's resource.
func (pt InputPoint) selector(s *scenarios.Scenario) scenarios.Selector {
	return scenarios.Selector{APIVersion: fmt.Sprint(s.Objects[pt.Object].Manifest["apiVersion"]), Kind: pt.Kind, Name: pt.Name}
}

// base is s named for pt's run of the given part, without its faults.
func (pt InputPoint) base(s *scenarios.Scenario, part string) *scenarios.Scenario {
	out := *s
	out.Name = pointName(s.Name, pt.ID+"-"+part)
	out.Description = fmt.Sprintf("%s, %s one change of its input: %s", s.Name, part, pt.Signature())
	out.Faults = nil
	return &out
}

// Inconsistent compares the end of a transition run with the end of the
// fresh run of the same input: the objects either controller wrote, and
// the changed resource, masked by m, must end alike. It returns the
// differences.
func Inconsistent(pt InputPoint, transition, fresh *reports.Result, m Masks) []Difference {
	written := writtenBy(transition)
	for obj := range writtenBy(fresh) {
		written[obj] = true
	}
	resources := resourcesOf(transition)
	for kind, res := range resourcesOf(fresh) {
		resources[kind] = res
	}
	judged := func(o flatObject) bool {
		return shortKind(o.kind) == pt.Kind && o.name == pt.Name || written[base(resources[o.kind])+"/"+o.name]
	}
	got, want := flatEnd(transition, m), flatEnd(fresh, m)
	var out []Difference
	for _, key := range sortedKeys(want) {
		w := want[key]
		if !judged(w) {
			continue
		}
		h, ok := got[key]
		if !ok {
			out = append(out, Difference{Oracle: OracleConsistency, Kind: shortKind(w.kind), Field: "(exists)", Object: w.name,
				Detail: fmt.Sprintf("%s %s is not there after %s; a run created with that input ends with it", shortKind(w.kind), w.name, pt.Signature())})
			continue
		}
		for _, f := range diffFields(w.fields, h.fields) {
			out = append(out, Difference{Oracle: OracleConsistency, Kind: shortKind(w.kind), Field: f, Object: w.name,
				Detail: fmt.Sprintf("%s %s: %s is %s after %s; a run created with that input ends with %s", shortKind(w.kind), w.name, f, valueOf(h.fields, f), pt.Signature(), valueOf(w.fields, f))})
		}
	}
	for _, key := range sortedKeys(got) {
		h := got[key]
		if _, ok := want[key]; !ok && judged(h) {
			out = append(out, Difference{Oracle: OracleConsistency, Kind: shortKind(h.kind), Field: "(exists)", Object: h.name,
				Detail: fmt.Sprintf("%s %s is still there after %s; a run created with that input ends without it", shortKind(h.kind), h.name, pt.Signature())})
		}
	}
	return dedupe(out)
}

// PlanInputs adds to p the input points of its scenario (InputPoints),
// drawn from its references, under rules and the scenario's own (its
// inputs: pin, exclude, values).
func (p *Plan) PlanInputs(rules InputRules) error {
	own := p.Scenario.Inputs
	rules.Pin = append(slices.Clone(rules.Pin), own.Pin...)
	rules.Exclude = append(slices.Clone(rules.Exclude), own.Exclude...)
	if len(own.Values) > 0 {
		values := maps.Clone(rules.Values)
		if values == nil {
			values = map[string][]any{}
		}
		for path, vs := range own.Values {
			values[path] = append(slices.Clone(values[path]), vs...)
		}
		rules.Values = values
	}
	pts, err := InputPoints(p.Scenario, p.References, rules)
	if err != nil {
		return err
	}
	p.Inputs = pts
	return nil
}

// InputShard is the i-th of n shares of p's input points.
func (p *Plan) InputShard(i, n int) []InputPoint { return shard(p.Inputs, i, n) }

// LongestFirst is inputs with the longest chains first, in their order
// otherwise: processes that share the points end closer together when the
// costliest are not left to the end.
func LongestFirst(inputs []InputPoint) []InputPoint {
	out := slices.Clone(inputs)
	slices.SortStableFunc(out, func(a, b InputPoint) int { return cmp.Compare(len(b.Changes), len(a.Changes)) })
	return out
}

// Point is pt as an exploration's outcomes and findings name it.
func (pt InputPoint) Point() Point {
	about := "a change of its input once the world had converged, against a run created with the changed input"
	if len(pt.Changes) > 1 {
		about = fmt.Sprintf("%d changes of its input, one after another, once the world had converged, against a run created with the changed input", len(pt.Changes))
	}
	if pt.ShrunkFrom != "" {
		about += "; shrunk from " + pt.ShrunkFrom
	}
	return Point{ID: pt.ID, Class: Input, Signature: pt.Signature(), At: pt.At, About: about, Size: len(pt.Changes)}
}

// InputOutcome judges pt's transition, fresh and recovery runs: by each
// run's verdict; by whether the transition ended as the fresh run did on
// the objects the controller wrote, beyond p's masks (Inconsistent); and
// by whether the recovery ended as the references did (Recovered). file
// is the transition's result file. A nil transition is read from the
// recovery run (TransitionOf), and file is then the recovery's; one that
// cannot be is the harness's error.
func (p *Plan) InputOutcome(pt InputPoint, transition, fresh, recovery *reports.Result, file string) Outcome {
	runs := []*reports.Result{transition, fresh, recovery}
	if transition == nil {
		runs = runs[1:]
	}
	o := Outcome{Point: pt.Point(), Result: file, Replay: recovery.Replay, Fired: true}
	if transition != nil {
		o.Replay = transition.Replay
	}
	for _, r := range runs {
		o.Wall += r.Wall
		if r.Error != "" {
			o.Error = text.FirstLine(r.Error)
			return o
		}
	}
	if transition == nil {
		var ok bool
		if transition, ok = p.TransitionOf(pt, recovery); !ok {
			o.Error = "the recovery run did not stand still before its writes back, and no transition run was run"
			return o
		}
	}
	o.Differences = verdictDifferences(transition)
	for _, d := range verdictDifferences(fresh) {
		d.Detail = "created with the changed input: " + d.Detail
		o.Differences = append(o.Differences, d)
	}
	for _, d := range verdictDifferences(recovery) {
		d.Detail = "changed and changed back: " + d.Detail
		o.Differences = append(o.Differences, d)
	}
	o.Differences = append(o.Differences, Inconsistent(pt, transition, fresh, p.Masks)...)
	o.Differences = append(o.Differences, p.Recovered(pt, recovery)...)
	o.Differences = dedupe(o.Differences)
	return o
}
