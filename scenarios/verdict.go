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

// verdict turns the history into the verdict, counters and budgets.
func (r *run) verdict() {
	res := r.res
	h := r.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	res.Simulated = reports.Duration(time.Since(r.start))
	res.Settle, res.Deadline = r.s.Timing.Settle, r.s.Timing.Deadline
	res.Invariants = r.invariants()
	r.checkForbidden()
	res.History = h.h
	if r.opts.EndState && r.obs != nil {
		res.History.End = r.obs.end()
	}
	found := slices.DeleteFunc(slices.Clone(h.findings), func(f reports.Finding) bool {
		return slices.Contains(r.s.Allow, f.Check)
	})
	slices.SortStableFunc(found, func(a, b reports.Finding) int { return a.At.Compare(b.At) })
	res.Findings = append(res.Findings, found...)
	for _, f := range found {
		res.Violations = append(res.Violations, f.Violation())
	}
	c := reports.Counters{RequestsByVerb: map[string]int{}, RequestsByCode: map[string]int{}, Writes: map[string]int{}, Needed: map[string]int{},
		Reconciles: -1, Retries: -1, Faults: len(h.h.Faults), Instances: r.nextIndex, GoalEvaluations: r.evaluations}
	for _, q := range h.h.Requests {
		c.RequestsByVerb[q.Verb]++
		code := strconv.Itoa(q.Code)
		if q.Code == 0 {
			code = "error"
		}
		c.RequestsByCode[code]++
	}
	for name, n := range h.writes {
		c.Writes[name] = n
	}
	if r.judge != nil {
		maps.Copy(c.Needed, r.judge.Needed())
	}
	if n := len(h.h.Samples); n > 0 {
		c.Reconciles, c.Retries = h.h.Samples[n-1].Reconciles, h.h.Samples[n-1].Retries
	}
	c.PodLag = reports.Duration(reports.PodLag(h.h.States))
	res.Counters = c
	res.Unfired = unfired(r.s.Faults, h.h.Faults)
	for _, name := range res.Unfired {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: name})
	}

	b := r.s.Budgets
	if b.WritesPerObject > 0 {
		for _, obj := range sortedKeys(c.Writes) {
			if w := c.Writes[obj]; w > b.WritesPerObject {
				resource, name, _ := strings.Cut(obj, "/")
				res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetWrites, Kind: reports.KindBudget,
					Subject: reports.Subject{Resource: resource, Namespace: r.env.Namespace, Name: name}, Count: w, Limit: b.WritesPerObject})
			}
		}
	}
	if b.Reconciles > 0 && c.Reconciles > b.Reconciles {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetReconciles, Kind: reports.KindBudget, Count: int(c.Reconciles), Limit: int(b.Reconciles)})
	}
	for _, key := range sortedKeys(b.Requests) {
		verb, resource, _ := strings.Cut(key, " ")
		n := 0
		for _, q := range h.h.Requests {
			if q.Verb == verb && (resource == "" || q.Resource == resource) {
				n++
			}
		}
		if n > b.Requests[key] {
			res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckBudgetRequests, Kind: reports.KindBudget, Key: key, Count: n, Limit: b.Requests[key]})
		}
	}
	res.Reasons = reports.Sentences(res.Findings, r.start)
	res.Pass = len(res.Reasons) == 0 && res.Converged
	if r.identity().IsZero() {
		res.Notes = append(res.Notes, "the controller ran with full rights: it declares no RBAC (implement scenarios.Identified), so a request a real cluster would refuse went through")
	}
	if r.obs != nil {
		if judged, unjudged := r.obs.acrossCounts(); unjudged > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("invariants across objects went unjudged at %d of %d instants: the API server could not list them as they were then (see the log)", unjudged, judged))
		}
	}
	if lag := time.Duration(c.PodLag); !res.Pass && lag >= slowPods {
		res.Notes = append(res.Notes, fmt.Sprintf("a Deployment waited %v for the pods it asked for: the %s backend was slow to create them, and the scenario's timings may not have left room for that", lag.Round(100*time.Millisecond), r.opts.Backend))
	}
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

// invariants names every invariant judged in the run.
func (r *run) invariants() []string {
	var out []string
	if r.judge != nil {
		out = append(out, r.judge.Invariants()...)
	}
	for _, inv := range r.s.Invariants {
		out = append(out, inv.Name)
	}
	if len(r.s.Writes) > 0 {
		out = append(out, InvWritesAllowed)
	}
	for _, b := range BuiltinInvariants {
		if b != InvWritesAllowed && !slices.Contains(r.s.Allow, b) {
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

// checkForbidden breaks no-forbidden-request on the controller's first
// 401 or 403, saying how many followed. Callers hold r.hist.mu.
func (r *run) checkForbidden() {
	var restarts []time.Time
	for _, f := range r.hist.h.Faults {
		if f.Fault == "apiserver-restart" {
			restarts = append(restarts, f.At)
		}
	}
	warming := func(at time.Time) bool {
		return slices.ContainsFunc(restarts, func(t time.Time) bool { return !at.Before(t) && at.Sub(t) < restartGrace })
	}
	var first *reports.Request
	n := 0
	for i, q := range r.hist.h.Requests {
		if (q.Code == http.StatusUnauthorized || q.Code == http.StatusForbidden) && !warming(q.At) {
			if first == nil {
				first = &r.hist.h.Requests[i]
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
	r.hist.findLocked(finding(InvNoForbidden, first.At, requestSubject(*first), first, detail))
}
