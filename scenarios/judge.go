package scenarios

import (
	"fmt"
	"slices"
	"time"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// Rejudge judges a saved run again from its history alone, under s: its
// invariants, write rules, goal, budgets and allowed checks as they are
// now. A nil s is the scenario as the run had it (the result's Spec).
//
// Kept as the run recorded them: what it found as it happened (a panic,
// an instance that did not stop, a hot loop, the findings of the
// controller's own judge), what that judge said of its own goal at each
// poll, and a harness error. The goal is judged at the instants it was
// polled at; when the run ended (its own goal reached) before s's goal
// was reached or missed, the goal fails saying so: run it again to judge
// that goal. A result recorded before histories held what a verdict needs
// (schema v2 and older) is refused.
func Rejudge(saved *reports.Result, s *Scenario) (*reports.Result, error) {
	if saved.History.Start.IsZero() {
		return nil, fmt.Errorf("the result of %s (seed %d) was saved without what a verdict is judged on (the objects seen, the writes sent, the polls of the goal): run it again", saved.Scenario, saved.Seed)
	}
	var ran *Scenario
	if len(saved.Spec) > 0 {
		var err error
		if ran, err = Parse(saved.Scenario+" (as it ran)", saved.Spec); err != nil {
			return nil, fmt.Errorf("the scenario the result holds: %w", err)
		}
	}
	if s == nil {
		if ran == nil {
			return nil, fmt.Errorf("the result of %s holds no scenario: give one", saved.Scenario)
		}
		s = ran
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	// The controller's own judge's checks: those the run judged that are
	// neither built in nor the scenario's.
	var judgeChecks []string
	for _, name := range saved.Invariants {
		if slices.Contains(BuiltinInvariants, name) || (ran != nil && slices.ContainsFunc(ran.Invariants, func(i Invariant) bool { return i.Name == name })) {
			continue
		}
		judgeChecks = append(judgeChecks, name)
	}
	res := *saved
	res.Notes = slices.Clone(saved.Notes)
	sd := s.withDefaults()
	v, err := conclude(&sd, &res, judgeChecks, saved.Counters.Needed)
	if err != nil {
		return nil, err
	}
	res.Settle, res.Deadline = sd.Timing.Settle, sd.Timing.Deadline
	decidedBefore := saved.Converged || slices.ContainsFunc(saved.Findings, func(f reports.Finding) bool { return f.Kind == reports.KindGoal })
	if !v.Decided && decidedBefore && saved.Error == "" {
		end := res.History.Start.Add(time.Duration(saved.Simulated))
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckGoal, Kind: reports.KindGoal, At: end, Within: sd.Timing.Deadline,
			Detail: fmt.Sprintf("undecided: the run's record ends at %v, before this goal held for its settle window or its deadline passed; run it again to judge this goal", time.Duration(saved.Simulated))})
	}
	if res.Error != "" {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckHarness, Kind: reports.KindHarness, Detail: res.Error})
	}
	res.Reasons = reports.Sentences(res.Findings, res.History.Start)
	res.Pass = len(res.Reasons) == 0 && res.Converged && res.Error == ""
	return &res, nil
}

// rules are what s asks of a run, as the checks read them.
func rules(s *Scenario) check.Rules {
	sel := func(x Selector) check.Selector {
		return check.Selector{APIVersion: x.APIVersion, Kind: x.Kind, Name: x.Name, Labels: x.Labels}
	}
	r := check.Rules{Busy: s.Goal.Busy, Settle: time.Duration(s.Timing.Settle), Deadline: time.Duration(s.Timing.Deadline), FaultsEnd: s.FaultsEnd(),
		RetryWithin: time.Duration(s.Timing.RetryWithin),
		Budgets:     check.Budgets{WritesPerObject: s.Budgets.WritesPerObject, Reconciles: s.Budgets.Reconciles, Requests: s.Budgets.Requests},
		Faults:      s.Faults, Allow: s.Allow}
	for _, inv := range s.Invariants {
		r.Invariants = append(r.Invariants, check.Invariant{Name: inv.Name, Select: sel(inv.Select), Rule: inv.Rule, MayBeVacuous: inv.MayBeVacuous})
	}
	for _, w := range s.Writes {
		r.Writes = append(r.Writes, check.WriteRule{Select: sel(w.Select), Verbs: w.Verbs, Fields: w.Fields, MayBeVacuous: w.MayBeVacuous})
	}
	for _, e := range s.Goal.Objects {
		r.Goal = append(r.Goal, check.Expectation{Select: sel(e.Select), Match: map[string]any(e.Match), Condition: e.Condition, Count: e.Count})
	}
	return r
}
