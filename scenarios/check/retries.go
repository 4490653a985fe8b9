package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

// RetriesFailedWrites breaks when a write the harness failed is neither
// retried nor counted as a retry: the work was dropped until some later
// event, or a resync, brings it back.
const RetriesFailedWrites = "retries-failed-writes"

// defaultRetryWithin is Rules.RetryWithin when it is zero.
const defaultRetryWithin = 10 * time.Second

func retriesFailedWrites() Check {
	return Check{
		Name: RetriesFailedWrites, Kind: reports.KindInvariant, Invariant: true,
		Catches: "work dropped after an error: a write (Leases and Events aside: an event is best effort, a Lease is renewed on its own clock) that a fault of the run failed (an injected 409, 429 or 5xx: the server's state did not change, so no event will bring the work back) after which, within timing.retryWithin (10 s unless the scenario says), the controller showed no retry: its probe's retries did not grow, where the probe counts them (Probe.CountsRetries: the scaler, Manager); elsewhere, the instance did not write that object again. A resync or an unrelated event would heal it later, so the goal alone misses it. Judged for a controller with a probe (Prober, Manager): without one, a retry that finds nothing to do cannot be told from a dropped key. Not judged past the run's end or the instance's.",
		Reads:   "the injected failures (History.Faults) against the requests (History.Requests), the probe's retries (History.Samples) and the instances' lives (History.Lives)",
		judge:   judgeRetries,
	}
}

func judgeRetries(j *judging) {
	if len(j.h.Samples) == 0 || len(j.h.Polls) == 0 {
		return // no probe: nothing tells a retry that wrote nothing
	}
	within := j.c.RetryWithin
	if within <= 0 {
		within = defaultRetryWithin
	}
	end := j.h.Polls[len(j.h.Polls)-1].At
	failed := injectedFailures(j.h.Faults)
	for k, q := range j.h.Requests {
		resource, _, _ := strings.Cut(q.Resource, "/")
		if !IsWrite(q.Verb) || Bookkeeping(resource) || !retriable(q.Code) || !failed[failure{q.At, requestString(q)}] {
			continue
		}
		by := q.At.Add(within)
		if by.After(end) || j.endedBy(q.Instance, q.At, by) {
			continue
		}
		// A probe that counts retries is the witness: a write sent again
		// may come of a later event, not of a retry.
		if counted, retried := j.retriedBy(q.At, by); retried || !counted && sentAgain(j.h.Requests[k+1:], q, by) {
			continue
		}
		j.find(Finding(RetriesFailedWrites, q.At, RequestSubject(q), &q, fmt.Sprintf(
			"instance %d's %s %s %s met an injected %d, and in the %v after it the instance neither counted a retry nor wrote the object again: the work was dropped until some later event brings it back",
			q.Instance, q.Verb, q.Resource, q.Name, q.Code, within)))
	}
}

type failure struct {
	at      time.Time
	request string
}

// injectedFailures are the requests faults answered with an error.
func injectedFailures(firings []chaos.Firing) map[failure]bool {
	out := map[failure]bool{}
	for _, f := range firings {
		if strings.HasPrefix(f.Outcome, "answered ") {
			out[failure{f.At, f.Request}] = true
		}
	}
	return out
}

// retriable: an answer a controller is expected to retry after.
func retriable(code int) bool {
	return code == 409 || code == 429 || code >= 500 && code <= 599
}

// requestString is q as a fault's firing names it.
func requestString(q reports.Request) string {
	obj := q.Name
	if q.Namespace != "" {
		obj = q.Namespace + "/" + q.Name
	}
	return strings.TrimSpace(q.Verb + " " + q.Resource + " " + obj)
}

// retriedBy says whether the probe counted retries from the failure at to
// by, and whether they grew then. The sample in force at the failure is
// the base; an instance that restarts starts its count again, so any
// growth counts.
func (j *judging) retriedBy(at, by time.Time) (counted, retried bool) {
	counted = true
	prev := int64(-1)
	for _, s := range j.h.Samples {
		if s.At.After(by) {
			break
		}
		if !s.At.After(at) {
			prev, counted = s.Retries, s.CountsRetries
			continue
		}
		counted = counted && s.CountsRetries
		if s.Retries > max(prev, 0) {
			retried = true
		}
		prev = s.Retries
	}
	return counted, retried
}

// sentAgain: the same instance wrote q's object again, by by, whatever
// the verb or the subresource (a create retried finds the object made and
// updates it).
func sentAgain(after []reports.Request, q reports.Request, by time.Time) bool {
	resource, _, _ := strings.Cut(q.Resource, "/")
	for _, r := range after {
		if r.At.After(by) {
			return false
		}
		res, _, _ := strings.Cut(r.Resource, "/")
		if r.Instance == q.Instance && IsWrite(r.Verb) && res == resource && r.Namespace == q.Namespace && r.Name == q.Name {
			return true
		}
	}
	return false
}

// endedBy: instance idx ended between at and by.
func (j *judging) endedBy(idx int, at, by time.Time) bool {
	for _, l := range j.h.Lives {
		if l.Instance == idx && !l.Ended.IsZero() && !l.Ended.After(by) {
			return true
		}
	}
	return false
}
