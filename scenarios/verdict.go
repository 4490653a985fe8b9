package scenarios

import (
	"fmt"
	"slices"
	"time"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// verdict judges the run from its history alone (package check) and adds
// what the harness noticed.
func (r *run) verdict() {
	res := r.res
	h := r.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	res.Simulated = reports.Duration(time.Since(r.start))
	res.Settle, res.Deadline = r.s.Timing.Settle, r.s.Timing.Deadline
	var judgeChecks []string
	var needed map[string]int
	if r.judge != nil {
		judgeChecks, needed = r.judge.Invariants(), r.judge.Needed()
	}
	res.History = h.h
	if r.opts.EndState {
		res.History.End = h.seen.End()
	}
	if _, err := conclude(&r.s, res, judgeChecks, needed); err != nil {
		res.Error = err.Error()
		return
	}
	for _, c := range r.controllers {
		switch {
		case !c.id.IsZero():
		case c.primary():
			res.Notes = append(res.Notes, "the controller ran with full rights: it declares no RBAC (implement scenarios.Identified), so a request a real cluster would refuse went through")
		default:
			res.Notes = append(res.Notes, fmt.Sprintf("the controller %s ran with full rights: it declares no RBAC (implement scenarios.Identified, or give its spec a serviceAccount and rbac), so a request a real cluster would refuse went through", c.name))
		}
	}
	if lag := time.Duration(res.Counters.PodLag); !res.Pass && lag >= slowPods {
		res.Notes = append(res.Notes, fmt.Sprintf("a Deployment waited %v for the pods it asked for: the %s backend was slow to create them, and the scenario's timings may not have left room for that", lag.Round(100*time.Millisecond), r.opts.Backend.Name()))
	}
}

// conclude judges res.History under s (with its defaults) and sets the
// verdict, counters and budgets of res from it. judgeChecks are the checks
// of the controller's own judge, needed what it says each object needed.
func conclude(s *Scenario, res *reports.Result, judgeChecks []string, needed map[string]int) (check.Verdict, error) {
	c, err := check.Compile(rules(s))
	if err != nil {
		return check.Verdict{}, err
	}
	v := c.Judge(&res.History, needed)
	res.Invariants = invariantNames(s, judgeChecks)
	res.Findings, res.Violations = v.Findings, nil
	for _, f := range v.Findings {
		if f.Kind != reports.KindGoal && f.Kind != reports.KindBudget && f.Kind != reports.KindUnfired {
			res.Violations = append(res.Violations, f.Violation())
		}
	}
	res.Converged, res.TimeToConverge = v.Converged, reports.Duration(v.TimeToConverge)
	res.Counters, res.Unfired, res.Inapplicable = v.Counters, v.Unfired, v.Inapplicable
	res.Reasons = reports.Sentences(res.Findings, res.History.Start.Round(0))
	res.Pass = len(res.Reasons) == 0 && res.Converged
	return v, nil
}

// invariantNames names every invariant judged in a run of s: the
// controller's own judge's checks, the scenario's, and the built-in ones
// the scenario does not allow (writes-allowed where it has write rules,
// no-write-war where it runs others).
func invariantNames(s *Scenario, judgeChecks []string) []string {
	out := slices.Clone(judgeChecks)
	for _, inv := range s.Invariants {
		out = append(out, inv.Name)
	}
	if len(s.Writes) > 0 {
		out = append(out, InvWritesAllowed)
	}
	if len(s.Others) > 0 && !slices.Contains(s.Allow, InvNoWriteWar) {
		out = append(out, InvNoWriteWar)
	}
	for _, b := range BuiltinInvariants {
		if b != InvWritesAllowed && b != InvNoWriteWar && !slices.Contains(s.Allow, b) {
			out = append(out, b)
		}
	}
	return out
}
