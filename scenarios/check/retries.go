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
		Catches: "work dropped after an error: a write (Leases and Events aside: an event is best effort, a Lease is renewed on its own clock) that a fault of the run failed (an injected 409, 429 or 5xx: the server's state did not change, so no event will bring the work back) after which, within timing.retryWithin (10 s unless the scenario says), the controller's probe counted no retry. A resync or an unrelated event would heal it later, so the goal alone misses it. Judged for a controller whose probe counts its retries (Probe.CountsRetries: the scaler, Manager, a plain client-go controller whose work queue has a name, a Prober that says so): a write sent again may come of a later event, and a retry may find nothing to write, so nothing else tells a retry from a dropped key. Not judged past the run's end or the instance's. Judged for the controller under test, whose probe the samples are.",
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
	for _, q := range j.h.Requests {
		if !UnderTest(q) {
			continue
		}
		resource, _, _ := strings.Cut(q.Resource, "/")
		if !IsWrite(q.Verb) || !retriable(q.Code) || strings.Contains(q.Error, "already exists") {
			continue // a create's AlreadyExists (409 too) is the server's own
		}
		// Each firing answered one request: the first failed one of that
		// request at that instant.
		key := failure{q.At, requestString(q)}
		if failed[key] == 0 {
			continue
		}
		failed[key]--
		if Bookkeeping(resource) {
			continue
		}
		by := q.At.Add(within)
		if by.After(end) || j.endedBy(q.Instance, q.At, by) {
			continue
		}
		// The probe's count of retries is the witness: a write sent again
		// may come of a later event, and a retry may find nothing to write.
		if counted, retried := j.retriedBy(q.At, by); retried || !counted {
			continue
		}
		j.find(Finding(RetriesFailedWrites, q.At, RequestSubject(q), &q, fmt.Sprintf(
			"instance %d's %s %s %s met an injected %d, and in the %v after it the instance counted no retry: the work was dropped until some later event brings it back",
			q.Instance, q.Verb, q.Resource, q.Name, q.Code, within)))
	}
}

type failure struct {
	at      time.Time
	request string
}

// injectedFailures counts the requests of the controller under test that
// faults answered with an error, by instant and request.
func injectedFailures(firings []chaos.Firing) map[failure]int {
	out := map[failure]int{}
	for _, f := range firings {
		if f.Controller == "" && strings.HasPrefix(f.Outcome, "answered ") {
			out[failure{f.At, f.Request}]++
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
// by, and whether they grew then. The last sample before the failure's
// instant is the base: one taken at that instant may already hold the
// retry (in virtual time the failure, the requeue and a poll share an
// instant, in any order). An instance that restarts starts its count
// again, so any growth counts.
func (j *judging) retriedBy(at, by time.Time) (counted, retried bool) {
	counted = true
	prev := int64(-1)
	for _, s := range j.h.Samples {
		if s.At.After(by) {
			break
		}
		if s.At.Before(at) {
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

// endedBy: instance idx ended between at and by.
func (j *judging) endedBy(idx int, at, by time.Time) bool {
	for _, l := range j.h.Lives {
		if l.Instance == idx && !l.Ended.IsZero() && !l.Ended.After(by) {
			return true
		}
	}
	return false
}
