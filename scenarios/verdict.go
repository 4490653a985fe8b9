package scenarios

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
)

// verdict judges the run from its history (judgeHistory) and adds the
// counters and budgets.
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
		res.History.End = endObjects(h.seen)
	}
	if _, err := conclude(&r.s, res, judgeChecks, needed); err != nil {
		res.Error = err.Error()
		return
	}
	if r.identity().IsZero() {
		res.Notes = append(res.Notes, "the controller ran with full rights: it declares no RBAC (implement scenarios.Identified), so a request a real cluster would refuse went through")
	}
	if lag := time.Duration(res.Counters.PodLag); !res.Pass && lag >= slowPods {
		res.Notes = append(res.Notes, fmt.Sprintf("a Deployment waited %v for the pods it asked for: the %s backend was slow to create them, and the scenario's timings may not have left room for that", lag.Round(100*time.Millisecond), r.opts.Backend))
	}
}

// conclude judges res.History under s (with its defaults) and sets the
// verdict, counters and budgets of res from it. judgeChecks are the checks
// of the controller's own judge, needed what it says each object needed.
func conclude(s *Scenario, res *reports.Result, judgeChecks []string, needed map[string]int) (judged, error) {
	h := &res.History
	j, err := judgeHistory(s, h)
	if err != nil {
		return j, err
	}
	res.Invariants = invariantNames(s, judgeChecks)
	found := slices.DeleteFunc(j.findings, func(f reports.Finding) bool {
		return slices.Contains(s.Allow, f.Check)
	})
	slices.SortStableFunc(found, func(a, b reports.Finding) int { return a.At.Compare(b.At) })
	res.Findings, res.Violations = nil, nil
	for _, f := range found {
		if f.Kind != reports.KindGoal {
			res.Violations = append(res.Violations, f.Violation())
		}
	}
	res.Findings = append(res.Findings, found...)
	res.Converged, res.TimeToConverge = j.converged, 0
	if j.converged {
		res.TimeToConverge = reports.Duration(j.ttc)
	}
	c := reports.Counters{RequestsByVerb: map[string]int{}, RequestsByCode: map[string]int{}, Writes: map[string]int{}, Needed: map[string]int{},
		Reconciles: -1, Retries: -1, Faults: len(h.Faults), Instances: len(h.Lives), GoalEvaluations: len(h.Polls)}
	namespaces := map[string]string{}
	for _, q := range h.Requests {
		c.RequestsByVerb[q.Verb]++
		code := strconv.Itoa(q.Code)
		if q.Code == 0 {
			code = "error"
		}
		c.RequestsByCode[code]++
		if successfulWrite(q) {
			resource, _, _ := strings.Cut(q.Resource, "/")
			c.Writes[resource+"/"+q.Name]++
			namespaces[resource+"/"+q.Name] = q.Namespace
		}
	}
	maps.Copy(c.Needed, needed)
	if n := len(h.Samples); n > 0 {
		c.Reconciles, c.Retries = h.Samples[n-1].Reconciles, h.Samples[n-1].Retries
	}
	c.PodLag = reports.Duration(reports.PodLag(h.States))
	res.Counters = c
	res.Unfired = unfired(s.Faults, h.Faults)
	for _, name := range res.Unfired {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: name})
	}

	b := s.Budgets
	if b.WritesPerObject > 0 {
		for _, obj := range sortedKeys(c.Writes) {
			if w := c.Writes[obj]; w > b.WritesPerObject {
				resource, name, _ := strings.Cut(obj, "/")
				res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetWrites, Kind: reports.KindBudget,
					Subject: reports.Subject{Resource: resource, Namespace: namespaces[obj], Name: name}, Count: w, Limit: b.WritesPerObject})
			}
		}
	}
	if b.Reconciles > 0 && c.Reconciles > b.Reconciles {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetReconciles, Kind: reports.KindBudget, Count: int(c.Reconciles), Limit: int(b.Reconciles)})
	}
	for _, key := range sortedKeys(b.Requests) {
		verb, resource, _ := strings.Cut(key, " ")
		n := 0
		for _, q := range h.Requests {
			if q.Verb == verb && (resource == "" || q.Resource == resource) {
				n++
			}
		}
		if n > b.Requests[key] {
			res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetRequests, Kind: reports.KindBudget, Key: key, Count: n, Limit: b.Requests[key]})
		}
	}
	res.Reasons = reports.Sentences(res.Findings, h.Start.Round(0))
	res.Pass = len(res.Reasons) == 0 && res.Converged
	return j, nil
}

// unfired names the faults of specs that no firing came from, as
// "fault 2 (watch-expired-mid-stream on pods)".
func unfired(specs []chaos.Spec, firings []chaos.Firing) []string {
	var out []string
	for i, spec := range specs {
		in, err := spec.Build()
		if err != nil {
			continue
		}
		fired := slices.ContainsFunc(firings, func(f chaos.Firing) bool {
			return f.Fault == spec.Fault && f.Target.Equal(in.Fault.Target())
		})
		if !fired {
			name := spec.Fault
			if spec.Target.Resource != "" {
				name += " on " + spec.Target.Resource
			}
			out = append(out, fmt.Sprintf("fault %d (%s)", i, name))
		}
	}
	return out
}

// invariantNames names every invariant judged in a run of s: the
// controller's own judge's checks, the scenario's, and the built-in ones
// the scenario does not allow.
func invariantNames(s *Scenario, judgeChecks []string) []string {
	out := slices.Clone(judgeChecks)
	for _, inv := range s.Invariants {
		out = append(out, inv.Name)
	}
	if len(s.Writes) > 0 {
		out = append(out, InvWritesAllowed)
	}
	for _, b := range BuiltinInvariants {
		if b != InvWritesAllowed && !slices.Contains(s.Allow, b) {
			out = append(out, b)
		}
	}
	return out
}

// restartGrace is how long after an API server restart a 401 or 403 is
// the server's authorizer warming up rather than the controller's RBAC: a
// restarted kube-apiserver refuses requests until its caches of roles and
// bindings have synced.
const restartGrace = time.Minute

// forbidden breaks no-forbidden-request on the controller's first 401 or
// 403, saying how many followed.
func (j *judging) forbidden() {
	var restarts []time.Time
	for _, f := range j.h.Faults {
		if p, _ := chaos.PlaneOfFault(f.Fault); p.RestartsAPIServer {
			restarts = append(restarts, f.At)
		}
	}
	warming := func(at time.Time) bool {
		return slices.ContainsFunc(restarts, func(t time.Time) bool { return !at.Before(t) && at.Sub(t) < restartGrace })
	}
	var first *reports.Request
	n := 0
	for i, q := range j.h.Requests {
		if (q.Code == http.StatusUnauthorized || q.Code == http.StatusForbidden) && !warming(q.At) {
			if first == nil {
				first = &j.h.Requests[i]
			}
			n++
		}
	}
	if first == nil {
		return
	}
	ns := ""
	if first.Namespace != "" {
		ns = " in " + first.Namespace
	}
	detail := fmt.Sprintf("the controller's %s %s%s was refused with %d", first.Verb, first.Resource, ns, first.Code)
	if first.Name != "" {
		detail = fmt.Sprintf("the controller's %s %s/%s%s was refused with %d", first.Verb, first.Resource, first.Name, ns, first.Code)
	}
	if n > 1 {
		detail += fmt.Sprintf(", and %d more requests after it", n-1)
	}
	if first.Error != "" {
		detail += ": " + text.FirstLine(first.Error)
	}
	j.find(finding(InvNoForbidden, first.At, requestSubject(*first), first, detail))
}
