package check

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

func invariantsAcross() Check {
	return Check{
		Name: "invariants-across", Kind: reports.KindInvariant,
		Catches: "a scenario's invariant across objects (a rule that reads `objects`) false of an object it selects, with every kind the rule reads as it was at one resourceVersion; each finding is named after its invariant.",
		Reads:   "every object the observer saw with its event (History.Events), rebuilt at each resourceVersion seen, except where a watch of the observer broke and listed again (History.Gaps), until the changes of its relist",
		judge:   judgeAcross,
	}
}

// maxJudgedAcross bounds the instants at which invariants across objects
// are judged in one run.
const maxJudgedAcross = 100_000

// judgeAcross judges the invariants across objects at each resourceVersion
// the observer saw: every kind they read as it was at exactly that
// version, whatever order the observer's informers delivered the events
// of different kinds in. Between two such versions nothing a rule reads
// changed. A deletion learnt from a relist (a tombstone) carries the
// object's last version, not the deletion's: it counts from the newest
// version seen when it arrived.
func judgeAcross(j *judging) {
	var invs []compiledInvariant
	var kinds []string
	for _, inv := range j.c.invariants {
		if inv.expr.Across() {
			invs = append(invs, inv)
			kinds = append(kinds, KindsAcross(inv.Rule)...)
			kinds = append(kinds, inv.Select.Kind)
		}
	}
	if len(invs) == 0 {
		return
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	type instant struct {
		rv uint64
		i  int
	}
	var order []instant
	var newest uint64
	for i, e := range j.h.Events {
		if e.Object == nil || !slices.Contains(kinds, parseKind(e.Kind).Kind) {
			continue
		}
		rv, err := strconv.ParseUint(e.RV, 10, 64)
		if err != nil || e.Tombstone {
			rv = newest // an opaque version counts where it arrived
		}
		newest = max(newest, rv)
		order = append(order, instant{rv, i})
	}
	slices.SortStableFunc(order, func(a, b instant) int { return cmp.Compare(a.rv, b.rv) })
	blind := blindSpans(j.h, kinds)
	state := map[string]map[objectKey]map[string]any{} // by kind
	for _, k := range kinds {
		state[k] = map[objectKey]map[string]any{}
	}
	for n, judged := 0, 0; n < len(order) && judged < maxJudgedAcross; judged++ {
		at := j.h.Events[order[n].i].At
		rv := j.h.Events[order[n].i].RV
		for start := n; n < len(order) && order[n].rv == order[start].rv; n++ {
			e := j.h.Events[order[n].i]
			if e.At.Before(at) {
				at = e.At
			}
			key := objectKey{e.Resource, e.Namespace, e.Name}
			if e.Type == "DELETED" {
				delete(state[parseKind(e.Kind).Kind], key)
			} else {
				state[parseKind(e.Kind).Kind][key] = e.Object
			}
		}
		if n64, err := strconv.ParseUint(rv, 10, 64); err == nil && slices.ContainsFunc(blind, func(b span) bool { return b.lo < n64 && n64 < b.hi }) {
			continue // a kind's objects are not known at this version
		}
		objects := make(map[string]any, len(kinds))
		for _, k := range kinds {
			keys := make([]objectKey, 0, len(state[k]))
			for key := range state[k] {
				keys = append(keys, key)
			}
			slices.SortFunc(keys, func(a, b objectKey) int {
				return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
			})
			items := make([]any, 0, len(keys))
			for _, key := range keys {
				items = append(items, state[k][key])
			}
			objects[k] = items
		}
		for _, inv := range invs {
			items, _ := objects[inv.Select.Kind].([]any)
			for _, it := range items {
				obj, _ := it.(map[string]any)
				u := &unstructured.Unstructured{Object: obj}
				if u.GetAPIVersion() != inv.Select.APIVersion || !Matches(inv.Select.Name, inv.sel, u) {
					continue
				}
				held, err := inv.expr.EvalAcross(obj, objects)
				j.judged(inv, at, inv.Select.Kind, u, held, err, func() string {
					return fmt.Sprintf("%s %s at resourceVersion %s, with the objects of %v as they were then: %s is false%s",
						inv.Select.Kind, u.GetName(), rv, kinds, inv.Rule, read(inv.expr.Explain(obj, nil, objects)))
				})
			}
		}
	}
}

// span is the resourceVersions strictly between lo and hi.
type span struct{ lo, hi uint64 }

// relistBurst is how long after the first event of a relist the others of
// the same relist are taken to have arrived: an informer delivers a
// relist's changes together.
const relistBurst = time.Second

// blindSpans are the resourceVersions at which the observer may not have
// known every object of the kinds: for each gap of its watch of one of them
// (History.Gaps), from the last version of the kind it saw before the gap
// to the newest of the relist's changes that followed it. A change made
// there reached the history as the relist's event alone, and a rule across
// kinds judged there would read the kind as it was before the gap beside
// the others as they were after. A gap with no change of the kind after it
// missed nothing.
func blindSpans(h *reports.History, kinds []string) []span {
	var out []span
	for _, g := range h.Gaps {
		kind := parseKind(h.Resources[g.Resource]).Kind
		if !slices.Contains(kinds, kind) {
			continue
		}
		var lo, hi uint64
		var burst time.Time
		for _, e := range h.Events {
			if e.Resource != g.Resource || e.Object == nil {
				continue
			}
			rv, err := strconv.ParseUint(e.RV, 10, 64)
			if err != nil {
				continue
			}
			switch {
			case !e.At.After(g.At):
				lo = max(lo, rv)
			case burst.IsZero():
				burst, hi = e.At.Add(relistBurst), rv
			case !e.At.After(burst):
				hi = max(hi, rv)
			}
		}
		if hi > lo {
			out = append(out, span{lo, hi})
		}
	}
	return out
}

var (
	transitionRule = regexp.MustCompile(`\boldObject\b`)
	acrossRule     = regexp.MustCompile(`\bobjects\b`)
	// acrossKind finds objects.Kind and objects['Kind'].
	acrossKind = regexp.MustCompile(`\bobjects\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*['"]([^'"]+)['"]\s*\])`)
)

// KindsAcross lists the kinds a rule across objects reads.
func KindsAcross(rule string) []string {
	var out []string
	for _, m := range acrossKind.FindAllStringSubmatch(rule, -1) {
		if k := m[1] + m[2]; !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// CompileRule compiles an invariant's rule: as a transition rule when it
// names oldObject, as a rule across objects when it names objects.
func CompileRule(rule string) (*expect.Expression, error) {
	return compileRule(rule, true)
}

// CompileCondition compiles a goal's condition: over object, and over
// objects (every object of each kind it names, as seen at one instant)
// when it names them; a condition judges a state, not a change, so it may
// not read oldObject.
func CompileCondition(condition string) (*expect.Expression, error) {
	return compileRule(condition, false)
}

func compileRule(rule string, changes bool) (*expect.Expression, error) {
	if !changes && transitionRule.MatchString(rule) {
		return nil, errors.New("a goal condition judges what the world is, not a change: it reads object and objects, not oldObject")
	}
	transition, across := transitionRule.MatchString(rule), acrossRule.MatchString(rule)
	switch {
	case transition && across:
		return nil, errors.New("a rule reads oldObject (a change of one object) or objects (several at one instant), not both")
	case across:
		return expect.CompileAcross(rule)
	}
	return expect.Compile(rule, transition)
}
