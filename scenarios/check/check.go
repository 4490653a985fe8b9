// Package check holds converge's built-in checks, one file each, and
// judges a run from its recorded history alone: Judge is a function of the
// rules a scenario sets and the history (reports.History), so a saved run
// is judged again with today's rules (scenarios.Rejudge, converge judge)
// and gets the verdict a live run would.
//
// Each check says its name, the kind of finding it makes, what it catches
// and what it reads from the history; All is the registry, and the list
// of built-in checks in docs/guide.md is generated from it (see
// TestGuideListsTheChecks). A check found as the run happens (a panic, an
// instance that does not stop, a hot loop) is recorded in the history's
// Recorded findings, which Judge keeps.
package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

// Check is one built-in check.
type Check struct {
	// Name is the check's stable name, as findings and allow lists name it.
	Name string
	// Kind of the findings it makes.
	Kind reports.Kind
	// Catches is what it catches, for the docs.
	Catches string
	// Reads is what it reads from the history.
	Reads string
	// Invariant: a run lists it among the invariants it judged, and a
	// scenario may allow it to break.
	Invariant bool
	// judge adds its findings; nil for a check the run records as it
	// happens (History.Recorded).
	judge func(*judging)
}

// All are the built-in checks, one line each, in the order the docs list
// them.
func All() []Check {
	return []Check{
		invariants(),
		invariantsAcross(),
		noPanic(),
		cleanShutdown(),
		oneWriterAtATime(),
		noWriteWar(),
		noBlindDelete(),
		noChildOfDeletedOwner(),
		noStaleWrite(),
		noHotLoop(),
		noCacheMutation(),
		noForbiddenRequest(),
		writesAllowed(),
		invariantEvaluates(),
		goal(),
		budgetWrites(),
		budgetReconciles(),
		budgetRequests(),
		retriesFailedWrites(),
		faultsFire(),
		noVacuousCheck(),
		harness(),
	}
}

// Named is the built-in check of that name.
func Named(name string) (Check, bool) {
	all := All()
	i := slices.IndexFunc(all, func(c Check) bool { return c.Name == name })
	if i < 0 {
		return Check{}, false
	}
	return all[i], true
}

// Invariants names the built-in checks a scenario may allow to break.
func Invariants() []string {
	var out []string
	for _, c := range All() {
		if c.Invariant {
			out = append(out, c.Name)
		}
	}
	return out
}

// Selector picks objects of one kind: by name, by labels, or all.
type Selector struct {
	APIVersion, Kind, Name string
	// Labels is a label selector ("app=web,tier!=db").
	Labels string
}

// Invariant is a named CEL rule over object (and oldObject, or objects).
type Invariant struct {
	Name   string
	Select Selector
	Rule   string
	// MayBeVacuous: a run in which it selects no object, or never reads
	// the fields it names, is no finding (see no-vacuous-check).
	MayBeVacuous bool
}

// WriteRule allows writes of the objects it selects, by verb and field.
type WriteRule struct {
	Select Selector
	Verbs  []string
	Fields []string
	// MayBeVacuous: a run in which it selects no write is no finding.
	MayBeVacuous bool
}

// Expectation is one part of the goal: a partial object, a condition, a
// count of the objects Select matches.
type Expectation struct {
	Select    Selector
	Match     map[string]any
	Condition string
	Count     *int
}

// Budgets cap the controller's writes, reconciles and requests.
type Budgets struct {
	WritesPerObject int
	Reconciles      int64
	Requests        map[string]int
}

// Rules are what a scenario asks of a run, as the checks read them.
type Rules struct {
	Invariants []Invariant
	Writes     []WriteRule
	Goal       []Expectation
	// Busy lets the controller write while the goal holds.
	Busy bool
	// Settle, Deadline and FaultsEnd count from the run's start.
	Settle, Deadline, FaultsEnd time.Duration
	// RetryWithin bounds the wait for a sign that a failed write will be
	// retried (retries-failed-writes); zero means 10s.
	RetryWithin time.Duration
	Budgets     Budgets
	Faults      []chaos.Spec
	// Allow names built-in checks the scenario lets break.
	Allow []string
}

// Compiled are rules with their CEL compiled and selectors parsed.
type Compiled struct {
	Rules
	invariants []compiledInvariant
	goals      []compiledExpectation
}

type compiledInvariant struct {
	Invariant
	expr       *expect.Expression
	transition bool
	sel        labels.Selector
}

type compiledExpectation struct {
	Expectation
	expr  *expect.Expression
	kinds []string // what objects the condition reads
	sel   labels.Selector
}

// Compile compiles r's rules.
func Compile(r Rules) (*Compiled, error) {
	c := &Compiled{Rules: r}
	for _, inv := range r.Invariants {
		expr, err := CompileRule(inv.Rule)
		if err != nil {
			return nil, fmt.Errorf("invariant %s: %w", inv.Name, err)
		}
		sel, _ := labels.Parse(inv.Select.Labels)
		c.invariants = append(c.invariants, compiledInvariant{Invariant: inv, expr: expr, transition: expr.Transition(), sel: sel})
	}
	for i, e := range r.Goal {
		ce := compiledExpectation{Expectation: e}
		if e.Condition != "" {
			expr, err := CompileCondition(e.Condition)
			if err != nil {
				return nil, fmt.Errorf("goal.objects[%d]: %w", i, err)
			}
			ce.expr, ce.kinds = expr, KindsAcross(e.Condition)
		}
		ce.sel, _ = labels.Parse(e.Select.Labels)
		c.goals = append(c.goals, ce)
	}
	return c, nil
}

// Verdict is what the history says under the rules.
type Verdict struct {
	// Findings of every check, the recorded ones included, in time order
	// (those with no instant last); a check the rules allow is left out.
	Findings []reports.Finding
	// Converged: the goal held for the settle window past the faults
	// before the deadline; TimeToConverge from the start to the instant
	// it began to hold.
	Converged      bool
	TimeToConverge time.Duration
	// Decided: the goal was reached, or the deadline passed, within the
	// polls the history holds.
	Decided  bool
	Counters reports.Counters
	// Unfired names the scenario's faults that never fired and its
	// invariants and write rules that could not fail (no-vacuous-check).
	Unfired []string
	// Inapplicable names the fault profile's faults that matched no
	// request of the controller.
	Inapplicable []string
}

// Judge judges h under c. needed is what the controller's own judge said
// each object needed (Counters.Needed).
func (c *Compiled) Judge(h *reports.History, needed map[string]int) Verdict {
	j := &judging{c: c, h: h, first: map[string]int{}, selected: map[string]bool{}, evaluated: map[string]bool{}, ruled: map[int]bool{}}
	j.v.Counters = counters(h, needed)
	for _, f := range h.Recorded {
		j.find(f)
	}
	for _, ch := range All() {
		if ch.judge != nil {
			ch.judge(j)
		}
	}
	found := slices.DeleteFunc(j.found, func(f reports.Finding) bool { return slices.Contains(c.Allow, f.Check) })
	slices.SortStableFunc(found, func(a, b reports.Finding) int {
		switch {
		case a.At.IsZero() && b.At.IsZero():
			return 0
		case a.At.IsZero():
			return 1
		case b.At.IsZero():
			return -1
		}
		return a.At.Compare(b.At)
	})
	j.v.Findings = found
	return j.v
}

// judging is one Judge in progress.
type judging struct {
	c     *Compiled
	h     *reports.History
	v     Verdict
	found []reports.Finding
	first map[string]int // index in found of each check's finding, for checks with one
	// selected and evaluated are the invariants that selected an object,
	// and that were true or false of one (no field missing); ruled are the
	// write rules that selected a write, by index.
	selected, evaluated map[string]bool
	ruled               map[int]bool
}

// find keeps the earliest finding of each check.
func (j *judging) find(f reports.Finding) {
	i, ok := j.first[f.Check]
	switch {
	case !ok:
		j.first[f.Check] = len(j.found)
		j.found = append(j.found, f)
	case f.At.Before(j.found[i].At):
		j.found[i] = f
	}
}

// add keeps f beside any other of its check (budgets: one per object).
func (j *judging) add(f reports.Finding) {
	j.found = append(j.found, f)
}

// Finding is a finding of check at at. Its kind is the check's own (a
// scenario's invariant is an invariant).
func Finding(check string, at time.Time, subject reports.Subject, q *reports.Request, detail string) reports.Finding {
	kind := reports.KindInvariant
	if c, ok := Named(check); ok {
		kind = c.Kind
	}
	if q != nil {
		q = new(*q)
	}
	return reports.Finding{Check: check, Kind: kind, Subject: subject, At: at, Request: q, Detail: detail}
}

// ObjectSubject is the object u.
func ObjectSubject(u *unstructured.Unstructured) reports.Subject {
	gvk := u.GroupVersionKind()
	return reports.Subject{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// RequestSubject is the object a request names.
func RequestSubject(q reports.Request) reports.Subject {
	return reports.Subject{Resource: q.Resource, Namespace: q.Namespace, Name: q.Name}
}

// Matches: u has the name (when given) and the labels sel selects.
func Matches(name string, sel labels.Selector, u *unstructured.Unstructured) bool {
	return (name == "" || name == u.GetName()) && (sel == nil || sel.Matches(labels.Set(u.GetLabels())))
}

// Bookkeeping says whether a resource is a controller's own bookkeeping
// (leader election, events), left out of write counts and checks.
func Bookkeeping(resource string) bool {
	return resource == "leases" || resource == "events"
}

// IsWrite: the verb changes what the server holds.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// SuccessfulWrite: q is a write of a controller that the server took, of
// an object rather than of its bookkeeping.
func SuccessfulWrite(q reports.Request) bool {
	resource, _, _ := strings.Cut(q.Resource, "/")
	return IsWrite(q.Verb) && q.Code >= 200 && q.Code < 300 && !Bookkeeping(resource)
}

// UnderTest: q is a request of the controller under test, not of another
// controller the scenario runs beside it. The checks about the controller
// (its write rules, budgets, retries) judge its requests alone.
func UnderTest(q reports.Request) bool { return q.Controller == "" }

// Markdown is the list of built-in checks for the docs: one item each,
// with its name, kind, what it catches and what it reads.
func Markdown() string {
	var b strings.Builder
	for _, c := range All() {
		fmt.Fprintf(&b, "- `%s` (%s): %s Reads %s.\n", c.Name, c.Kind, c.Catches, c.Reads)
	}
	return b.String()
}
