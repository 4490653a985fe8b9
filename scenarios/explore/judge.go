package explore

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/converge-lab/converge/reports"
)

// Oracles: what a point's run is judged by.
const (
	// OracleVerdict: the scenario's own verdict, its invariants (no panic
	// among them), goal and budgets.
	OracleVerdict = "verdict"
	// OracleEndState: an object at the end differs from the references',
	// beyond the masks.
	OracleEndState = "end-state"
	// OracleEvents: an object was added or deleted a number of times no
	// reference saw.
	OracleEvents = "events"
	// OracleLiveness: the run converged later than the references and the
	// fault's own duration allow (see Lateness).
	OracleLiveness = "liveness"
	// OracleConsistency: after a change of its input, an object the
	// controller wrote ends otherwise than in a run created with that
	// input (InputPoint, Inconsistent).
	OracleConsistency = "consistency"
	// OracleRecovery: after a change of its input and its undoing, an
	// object the controller wrote ends otherwise than in the references
	// (InputPoint.Recovery, Plan.Recovered).
	OracleRecovery = "recovery"
)

// Difference is one way a run differs from the references.
type Difference struct {
	Oracle string `json:"oracle"`
	// Kind and Field say what differs: an invariant's name, "goal" or
	// "budget" for the verdict; an object's kind and field for the end
	// state; the resource for events.
	Kind   string `json:"kind,omitempty"`
	Field  string `json:"field,omitempty"`
	Object string `json:"object,omitempty"`
	Detail string `json:"detail"`
	// Lateness is what the liveness oracle measured, for its differences.
	Lateness *Lateness `json:"lateness,omitempty"`
}

// key groups differences into findings.
func (d Difference) key() string { return d.Oracle + " " + d.Kind + " " + d.Field }

// Judge compares r, a run of one of p's points, with the references.
func (p *Plan) Judge(r *reports.Result) []Difference {
	out := append(verdictDifferences(r), p.endDifferences(r)...)
	counts := eventCounts(r)
	for _, obj := range sortedKeys(p.Counts) {
		c := counts[obj]
		if slices.Contains(p.Counts[obj], c) {
			continue
		}
		resource, _, _ := strings.Cut(obj, "/")
		out = append(out, Difference{Oracle: OracleEvents, Kind: resource, Field: "added/deleted", Object: obj,
			Detail: fmt.Sprintf("%s added %d and deleted %d times; the references: %s", obj, c.Added, c.Deleted, countsText(p.Counts[obj]))})
	}
	// An object the controller made that no reference ever saw.
	for _, obj := range sortedKeys(writtenBy(r)) {
		resource, name, _ := strings.Cut(obj, "/")
		if p.Seen[obj] || collapse(name) != name || !counts[obj].made() || p.noisyFamily[family(obj)] {
			continue
		}
		if !p.seenInSome[obj] {
			c := counts[obj]
			out = append(out, Difference{Oracle: OracleEvents, Kind: resource, Field: "added/deleted", Object: obj,
				Detail: fmt.Sprintf("%s added %d and deleted %d times; no reference run had it", obj, c.Added, c.Deleted)})
		}
	}
	if d, late := p.late(r); late {
		out = append(out, d)
	}
	return dedupe(out)
}

// endDifferences compares the end state of r with the references'.
func (p *Plan) endDifferences(r *reports.Result) []Difference {
	var out []Difference
	p.learnOnce.Do(p.learn)
	ref := p.refEnd
	got := flatEnd(r, p.Masks)
	for _, key := range sortedKeys(ref) {
		want := ref[key]
		have, ok := got[key]
		if !ok && (p.volatile(want.name) || p.noisyExists[key]) {
			continue
		}
		if !ok {
			out = append(out, Difference{Oracle: OracleEndState, Kind: shortKind(want.kind), Field: "(exists)", Object: want.name,
				Detail: fmt.Sprintf("%s %s is gone at the end; every reference run ended with it", shortKind(want.kind), want.name)})
			continue
		}
		for _, f := range diffFields(want.fields, have.fields) {
			out = append(out, Difference{Oracle: OracleEndState, Kind: shortKind(want.kind), Field: f, Object: want.name,
				Detail: fmt.Sprintf("%s %s: %s is %s, the references' %s", shortKind(want.kind), want.name, f, valueOf(have.fields, f), valueOf(want.fields, f))})
		}
	}
	for _, key := range sortedKeys(got) {
		o := got[key]
		if _, ok := ref[key]; !ok && !p.volatile(o.name) && !p.noisyExists[key] && !p.noisyFamily[p.familyOf(o.kind, o.name)] {
			out = append(out, Difference{Oracle: OracleEndState, Kind: shortKind(o.kind), Field: "(exists)", Object: o.name,
				Detail: fmt.Sprintf("%s %s exists at the end; no reference run ended with it", shortKind(o.kind), o.name)})
		}
	}
	return out
}

// made: the object was added during the run.
func (c EventCount) made() bool { return c.Added > 0 }

// learn derives from the references, once, what every judgement reads.
func (p *Plan) learn() {
	p.refEnd = flatEnd(p.References[0], p.Masks)
	// Objects some references did not end with, keyed as flatEnd keys
	// them; the name families whose names the references disagree on.
	p.resourceOf = map[string]string{}
	inAll := map[string]int{}
	for _, ref := range p.References {
		maps.Copy(p.resourceOf, resourcesOf(ref))
		for key := range flatEnd(ref, p.Masks) {
			inAll[key]++
		}
	}
	p.noisyExists = map[string]bool{}
	for key, n := range inAll {
		p.noisyExists[key] = n < len(p.References)
	}
	p.noisyFamily = map[string]bool{}
	for _, f := range p.Noise.Families {
		p.noisyFamily[f] = true
	}
	p.baseline = baselineOf(p.References)
	p.seenInSome = map[string]bool{}
	for _, ref := range p.References {
		for obj := range eventCounts(ref) {
			p.seenInSome[obj] = true
		}
	}
	p.volatileNames = map[string]bool{}
	for obj := range p.Volatile {
		_, name, _ := strings.Cut(obj, "/")
		p.volatileNames[name] = true
	}
}

// familyOf is the name family (resource/prefix) of an object at the end.
func (p *Plan) familyOf(kind, name string) string {
	return family(cmp.Or(p.resourceOf[kind], shortKind(kind)) + "/" + name)
}

// volatile: another actor deleted an object of this name in a reference.
func (p *Plan) volatile(name string) bool { return p.volatileNames[name] }

// dedupe keeps one difference per key and object.
func dedupe(ds []Difference) []Difference {
	seen := map[string]bool{}
	return slices.DeleteFunc(ds, func(d Difference) bool {
		k := d.key() + "\x00" + d.Object
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}

// verdictDifferences are r's findings as the verdict oracle's
// differences: its broken invariants, then the goal, then its budgets.
func verdictDifferences(r *reports.Result) []Difference {
	var out []Difference
	for _, f := range r.Findings {
		switch f.Kind {
		case reports.KindGoal, reports.KindBudget, reports.KindHarness, reports.KindUnfired:
		default:
			out = append(out, Difference{Oracle: OracleVerdict, Kind: "invariant", Field: f.Check, Object: f.Subject.Name, Detail: f.Detail})
		}
	}
	if !r.Converged {
		detail := "never converged"
		if i := slices.IndexFunc(r.Findings, func(f reports.Finding) bool { return f.Kind == reports.KindGoal }); i >= 0 {
			detail = r.Findings[i].Sentence(r.Started)
		}
		out = append(out, Difference{Oracle: OracleVerdict, Kind: "goal", Field: "converged", Detail: detail})
	}
	for _, f := range r.Findings {
		if f.Kind == reports.KindBudget {
			out = append(out, Difference{Oracle: OracleVerdict, Kind: "budget", Field: budgetField[f.Check], Detail: f.Sentence(r.Started)})
		}
	}
	return out
}

// budgetField is what a budget finding is about.
var budgetField = map[string]string{
	reports.CheckBudgetWrites:     "writes per object",
	reports.CheckBudgetReconciles: "reconciles",
	reports.CheckBudgetRequests:   "requests",
}

// valueOf is the value of field f (indexes as [*]) in fields: all values
// of its elements for a list field, or "absent".
func valueOf(fields map[string]string, f string) string {
	var vals []string
	for _, k := range sortedKeys(fields) {
		if field(k) == f {
			vals = append(vals, fields[k])
		}
	}
	switch len(vals) {
	case 0:
		return "absent"
	case 1:
		return vals[0]
	}
	return "[" + strings.Join(vals, " ") + "]"
}

func countsText(cs []EventCount) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%d/%d", c.Added, c.Deleted))
	}
	return strings.Join(parts, " or ") + " (added/deleted)"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
