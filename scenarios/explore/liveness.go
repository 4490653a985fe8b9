package explore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

// Lateness is what the liveness oracle weighed for one run: its time to
// converge against the allowance (see the package doc for the formula).
type Lateness struct {
	// Converged is the run's time to converge, from its start.
	Converged reports.Duration `json:"converged"`
	// Latest is the latest a reference converged, less how late its
	// controller started.
	Latest reports.Duration `json:"latest"`
	// Spread is how far apart the references that started as written
	// converged.
	Spread reports.Duration `json:"spread"`
	// Fault is how long the point's fault held the controller back, from
	// its first firing to the end of its effect in this run.
	Fault reports.Duration `json:"fault"`
	// Backoff is what the controller's backoff may add after the fault:
	// twice its last wait between two attempts the fault answered.
	Backoff reports.Duration `json:"backoff"`
	// Resolution is the goal's poll period (scenarios.Poll): a run's
	// convergence is seen up to that late.
	Resolution reports.Duration `json:"resolution"`
	// Allowed is their sum, Latest to Resolution.
	Allowed reports.Duration `json:"allowed"`
	// Idle is the run's longest wait between two requests of the
	// controller before it converged; IdleLatest the references' longest;
	// IdleAllowed that plus Fault, Backoff and Resolution. A run that
	// converged late because the world's timing moved (a readiness that
	// flaps on its own schedule) waits no longer than the references did;
	// a run whose work was dropped waits for a resync or an unrelated
	// event.
	Idle        reports.Duration `json:"idle"`
	IdleLatest  reports.Duration `json:"idleLatest"`
	IdleAllowed reports.Duration `json:"idleAllowed"`
}

// baseline is what the references say of convergence.
type baseline struct {
	latest, spread, idle time.Duration
	ok                   bool
}

// baselineOf reads the references' times to converge: the latest, each
// less its controller's late start (a late start is a delay a correct
// controller took), and the spread of those that started as written.
func baselineOf(refs []*reports.Result) baseline {
	var b baseline
	earliest := time.Duration(-1)
	for _, r := range refs {
		if s := firstStart(r); earliest < 0 || s < earliest {
			earliest = s
		}
	}
	var lo, hi time.Duration
	prompt := 0
	for _, r := range refs {
		if !r.Converged {
			return baseline{}
		}
		late := firstStart(r) - earliest
		t := time.Duration(r.TimeToConverge)
		b.idle = max(b.idle, idleBefore(r, time.Time{}))
		b.latest = max(b.latest, t-late)
		if late == 0 {
			if prompt == 0 {
				lo, hi = t, t
			}
			lo, hi = min(lo, t), max(hi, t)
			prompt++
		}
	}
	b.spread = hi - lo
	b.ok = len(refs) > 0
	return b
}

// late judges r's time to converge against the references': a run that
// converged later than the latest of them by more than their spread, its
// fault's duration, the controller's backoff and the goal's resolution
// allow is a difference.
func (p *Plan) late(r *reports.Result) (Difference, bool) {
	if len(r.Plan) == 0 || !viewsOnly(r.Plan[1:]) {
		return Difference{}, false
	}
	fault, backoff := faultEffect(r.Plan[0], r, r.History.Faults)
	return judgeLate(p.baseline, r, max(fault, viewHeld(r)), backoff, "the fault")
}

// Late judges r, a run under faults (a fault profile's, say), against
// refs, fault-free runs of the same world (References): the liveness
// oracle of the package doc, with the whole plan's effect for the fault's.
// Each of the plan's faults is weighed by its own firings; the effect runs
// from the first firing of any to the latest end of their effects, and the
// backoff is the largest any of them shows. A run in which no fault fired
// is not judged (it is a reference), nor is one that did not converge or
// one against references that did not all converge.
func Late(refs []*reports.Result, r *reports.Result) (Difference, bool) {
	if len(r.History.Faults) == 0 {
		return Difference{}, false
	}
	fault, backoff := planEffect(r)
	return judgeLate(baselineOf(refs), r, max(fault, viewHeld(r)), backoff, "the faults")
}

// judgeLate is the liveness oracle: r is late against b when it converged
// later than the allowance and idled longer than the references did, both
// by more than what fault and backoff excuse. what names the fault in the
// detail.
func judgeLate(b baseline, r *reports.Result, fault, backoff time.Duration, what string) (Difference, bool) {
	if !b.ok || !r.Converged {
		return Difference{}, false
	}
	l := Lateness{Converged: r.TimeToConverge, Latest: reports.Duration(b.latest), Spread: reports.Duration(b.spread),
		Fault: reports.Duration(fault), Backoff: reports.Duration(backoff), Resolution: reports.Duration(scenarios.Poll)}
	l.Allowed = l.Latest + l.Spread + l.Fault + l.Backoff + l.Resolution
	var fired time.Time
	if len(r.History.Faults) > 0 {
		fired = r.History.Faults[0].At
	}
	l.Idle, l.IdleLatest = reports.Duration(idleBefore(r, fired)), reports.Duration(b.idle)
	l.IdleAllowed = l.IdleLatest + l.Fault + l.Backoff + l.Resolution
	if l.Converged <= l.Allowed || l.Idle <= l.IdleAllowed {
		return Difference{}, false
	}
	return Difference{Oracle: OracleLiveness, Kind: "goal", Field: "time to converge", Lateness: &l,
		Detail: fmt.Sprintf("converged after %v, %v allowed (the references by %v, spread %v; %s held the controller back %v, backoff %v); "+
			"the controller sent nothing for %v before, the references for %v at most",
			time.Duration(l.Converged), time.Duration(l.Allowed), time.Duration(l.Latest), time.Duration(l.Spread), what, time.Duration(l.Fault),
			time.Duration(l.Backoff), time.Duration(l.Idle), time.Duration(l.IdleLatest))}, true
}

// planEffect is how long r's faults held the controller back, from the
// first firing of any to the latest end of their effects, and the largest
// backoff any of them shows. A firing is a fault's when it names the
// fault's kind; two faults of one kind each weigh every firing of it,
// which can only lengthen what is allowed.
func planEffect(r *reports.Result) (effect, backoff time.Duration) {
	fs := r.History.Faults
	first := fs[0].At
	for _, spec := range r.Plan {
		var own []chaos.Firing
		for _, f := range fs {
			if f.Fault == spec.Fault {
				own = append(own, f)
			}
		}
		if len(own) == 0 {
			continue
		}
		e, b := faultEffect(spec, r, own)
		effect = max(effect, own[0].At.Sub(first)+e)
		backoff = max(backoff, b)
	}
	return effect, backoff
}

// viewsOnly: the faults a point adds to its first are the views of a
// restart (Point.Also).
func viewsOnly(also []chaos.Spec) bool {
	return !slices.ContainsFunc(also, func(f chaos.Spec) bool { return f.Fault != chaos.FaultTimeTravel })
}

// viewHeld is how long after r's first firing a time-travel's view
// stopped holding the controller back: its firing plus its hold.
func viewHeld(r *reports.Result) time.Duration {
	fs := r.History.Faults
	var out time.Duration
	for _, f := range fs {
		if f.Fault != chaos.FaultTimeTravel || strings.HasPrefix(f.Outcome, "passed on") {
			continue
		}
		hold := chaos.DefaultTravelHold
		for _, s := range r.Plan {
			if s.Fault == chaos.FaultTimeTravel && s.Hold > 0 {
				hold = s.Hold
			}
		}
		out = max(out, f.At.Add(hold).Sub(fs[0].At))
	}
	return out
}

// idleBefore is r's longest wait between two requests of the controller
// (its Lease's renewals aside, which go on whatever it does) up to when it
// converged, counting only what followed since (a point's first firing):
// a wait before the fault fired is the world's, as in the references.
func idleBefore(r *reports.Result, since time.Time) time.Duration {
	converged := r.History.Start
	if converged.IsZero() {
		converged = r.Started
	}
	converged = converged.Add(time.Duration(r.TimeToConverge))
	var out time.Duration
	prev := since
	for _, q := range r.History.Requests {
		if base(q.Resource) == "leases" || q.At.Before(since) {
			continue
		}
		if q.At.After(converged) {
			break
		}
		if !prev.IsZero() {
			out = max(out, q.At.Sub(prev))
		}
		prev = q.At
	}
	return out
}

// faultEffect is how long fault held the controller back in r, from its
// first firing to the end of its effect, and what the controller's
// backoff may add once it ends.
//
// The end of the effect is read from r: the last firing for a refused
// request, plus its Retry-After or its hold; the delivery of a held-back
// event; the controller's next list or watch of the resource (its
// informer's relist, after the informer's own backoff) for a watch that
// ended or lost a frame; and for a crash or a SIGTERM, the moment a
// successor runs and leads (the goal's polls say when).
//
// The backoff is twice the last wait between two firings: a controller
// that retries with a backoff that at most doubles tries again within
// that of the fault's end. One firing shows no wait, and allows none.
// fs are the fault's firings in r.
func faultEffect(fault chaos.Spec, r *reports.Result, fs []chaos.Firing) (effect, backoff time.Duration) {
	if len(fs) == 0 {
		return 0, 0
	}
	first, last := fs[0].At, fs[len(fs)-1].At
	end := last
	switch {
	case chaos.EndsInstance(fault.Fault):
		end = successorRuns(r, last)
	case fault.Fault == chaos.FaultWatchDelay || fault.Fault == chaos.FaultLatency:
		end = last.Add(fault.Delay)
	case endsWatch[fault.Fault] || readsOnly(fault.Target.Verbs):
		end = relisted(r, fault.Target.Resource, last)
	case fault.Fault == chaos.FaultThrottle || fault.Fault == chaos.FaultServerError:
		end = last.Add(time.Duration(fault.RetryAfter) * time.Second)
	}
	if len(fs) > 1 {
		backoff = 2 * fs[len(fs)-1].At.Sub(fs[len(fs)-2].At)
	}
	return end.Sub(first), backoff
}

// endsWatch are the faults after which an informer learns the truth only
// from a relist.
var endsWatch = map[string]bool{chaos.FaultWatchExpired: true, chaos.FaultWatchExpiredMidStream: true, chaos.FaultWatchLost: true,
	chaos.FaultWatchDrop: true, chaos.FaultWatchClose: true, chaos.FaultTombstone: true}

// readsOnly: verbs are an informer's (list, watch): an error answering
// one ends when the informer lists again, after its own backoff.
func readsOnly(verbs []string) bool {
	return len(verbs) > 0 && !slices.ContainsFunc(verbs, func(v string) bool { return v != "list" && v != "watch" })
}

// relisted is when the controller next listed or watched resource after
// at; at when it did not.
func relisted(r *reports.Result, resource string, at time.Time) time.Time {
	for _, q := range r.History.Requests {
		if q.At.After(at) && (q.Verb == "list" || q.Verb == "watch") && (resource == "" || base(q.Resource) == resource) {
			return q.At
		}
	}
	return at
}

// successorRuns is when, after at, an instance had started since and
// the goal's poll saw an instance running (leading, where it elects):
// at when neither shows.
func successorRuns(r *reports.Result, at time.Time) time.Time {
	end := at
	for _, l := range r.History.Lives {
		if l.Started.After(at) {
			end = l.Started
			break
		}
	}
	for _, poll := range r.History.Polls {
		if !poll.At.Before(end) && poll.Live > 0 && !poll.Replacing {
			return poll.At
		}
	}
	return end
}
