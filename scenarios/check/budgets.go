package check

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-lab/converge/reports"
)

func budgetWrites() Check {
	return Check{
		Name: reports.CheckBudgetWrites, Kind: reports.KindBudget,
		Catches: "more successful writes of one object (Leases and Events aside) by the controller under test than the scenario's `budgets.writesPerObject`: one finding per object.",
		Reads:   "the controller under test's successful writes (History.Requests)",
		judge:   judgeBudgetWrites,
	}
}

func budgetReconciles() Check {
	return Check{
		Name: reports.CheckBudgetReconciles, Kind: reports.KindBudget,
		Catches: "more reconciles of all instances together than `budgets.reconciles`, where the controller can be probed.",
		Reads:   "the last probe sample (History.Samples)",
		judge:   judgeBudgetReconciles,
	}
}

func budgetRequests() Check {
	return Check{
		Name: reports.CheckBudgetRequests, Kind: reports.KindBudget,
		Catches: "more requests of the controller under test, of a verb or of a verb on a resource, than `budgets.requests` allows: one finding per entry.",
		Reads:   "the controller under test's requests (History.Requests)",
		judge:   judgeBudgetRequests,
	}
}

func judgeBudgetWrites(j *judging) {
	limit := j.c.Budgets.WritesPerObject
	if limit <= 0 {
		return
	}
	namespaces := map[string]string{}
	for _, q := range j.h.Requests {
		if SuccessfulWrite(q) && UnderTest(q) {
			namespaces[writeKey(q)] = q.Namespace
		}
	}
	for _, obj := range slices.Sorted(maps.Keys(j.v.Counters.Writes)) {
		if w := j.v.Counters.Writes[obj]; w > limit {
			resource, name, _ := strings.Cut(obj, "/")
			j.add(reports.Finding{Check: reports.CheckBudgetWrites, Kind: reports.KindBudget,
				Subject: reports.Subject{Resource: resource, Namespace: namespaces[obj], Name: name}, Count: w, Limit: limit})
		}
	}
}

func judgeBudgetReconciles(j *judging) {
	if b, n := j.c.Budgets.Reconciles, j.v.Counters.Reconciles; b > 0 && n > b {
		j.add(reports.Finding{Check: reports.CheckBudgetReconciles, Kind: reports.KindBudget, Count: int(n), Limit: int(b)})
	}
}

func judgeBudgetRequests(j *judging) {
	b := j.c.Budgets.Requests
	for _, key := range slices.Sorted(maps.Keys(b)) {
		verb, resource, _ := strings.Cut(key, " ")
		n := 0
		for _, q := range j.h.Requests {
			if UnderTest(q) && q.Verb == verb && (resource == "" || q.Resource == resource) {
				n++
			}
		}
		if n > b[key] {
			j.add(reports.Finding{Check: reports.CheckBudgetRequests, Kind: reports.KindBudget, Key: key, Count: n, Limit: b[key]})
		}
	}
}

// writeKey is the object a write counts for: "resource/name".
func writeKey(q reports.Request) string {
	resource, _, _ := strings.Cut(q.Resource, "/")
	return resource + "/" + q.Name
}

// counters are the run's totals, from h; needed is what the controller's
// own judge said each object needed. Requests, writes and instances are
// the controller under test's; faults count every firing.
func counters(h *reports.History, needed map[string]int) reports.Counters {
	c := reports.Counters{RequestsByVerb: map[string]int{}, RequestsByCode: map[string]int{}, Writes: map[string]int{}, Needed: map[string]int{},
		Reconciles: -1, Retries: -1, Faults: len(h.Faults), GoalEvaluations: len(h.Polls)}
	for _, l := range h.Lives {
		if l.Controller == "" {
			c.Instances++
		}
	}
	for _, q := range h.Requests {
		if !UnderTest(q) {
			continue
		}
		c.RequestsByVerb[q.Verb]++
		code := strconv.Itoa(q.Code)
		if q.Code == 0 {
			code = "error"
		}
		c.RequestsByCode[code]++
		if SuccessfulWrite(q) {
			c.Writes[writeKey(q)]++
		}
	}
	maps.Copy(c.Needed, needed)
	if n := len(h.Samples); n > 0 {
		c.Reconciles, c.Retries = h.Samples[n-1].Reconciles, h.Samples[n-1].Retries
	}
	c.PodLag = reports.Duration(reports.PodLag(h.States))
	return c
}
