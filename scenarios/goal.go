package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-lab/converge/reports"
)

// watchGoal evaluates the goal until it has held for the settle window or
// the deadline passed.
//
// Evaluations fall on a grid of Poll from the watcher's start, but only
// where the answer can differ from the last one: something happened since
// (a request, a watch event, a firing, an instance's start or end: the
// history's changes), an instance had work, or the settle window, the
// faults' end or the deadline falls due. An idle stretch, a controller
// waiting out a backoff, costs a wake-up per idleWake and nothing else.
func (r *run) watchGoal(ctx context.Context) {
	deadline := r.start.Add(time.Duration(r.s.Timing.Deadline))
	settle := time.Duration(r.s.Timing.Settle)
	var holding time.Time
	// Instants are offsets from t0; tick is the grid instant at or after
	// d, and after the last evaluation.
	t0 := time.Now()
	var last time.Duration
	tick := func(d time.Duration) time.Duration {
		return max((d+Poll-1)/Poll*Poll, last+Poll)
	}
	since := func(t time.Time) time.Duration { return t.Sub(t0) }
	timer := time.NewTimer(Poll)
	defer timer.Stop()
	// sleep waits until d, a wake-up or the run's end.
	sleep := func(d time.Duration, wake <-chan struct{}) {
		timer.Reset(d - since(time.Now()))
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-wake:
		}
		timer.Stop() // since Go 1.23, no stale tick stays in timer.C
	}
	quiet := false // the last evaluation needs no other unless something happens
	var seen uint64
	for first := true; ; first = false {
		at := tick(last)
		if !first && quiet {
			// Nothing to look at until something happens or a time falls
			// due; the caller's Limit is asked every idleWake meanwhile.
			due := tick(since(deadline))
			if !holding.IsZero() {
				due = min(due, tick(max(since(holding)+settle, since(r.start)+r.faultsEnd())))
			}
			for ctx.Err() == nil && !r.checkLimit() && r.hist.changes.Load() == seen {
				select {
				case <-r.hist.wake:
				default:
				}
				if r.hist.changes.Load() != seen {
					break
				}
				now := since(time.Now())
				if now >= due {
					break
				}
				sleep(min(due, now+idleWake), r.hist.wake)
			}
			// Strictly after now: what happened at this instant has the
			// rest of it to play out, as it has between two polls.
			at = tick(since(time.Now()) + 1)
		}
		if ctx.Err() == nil && since(time.Now()) < at {
			sleep(at, nil)
		}
		if ctx.Err() != nil {
			if !r.aborted.Load() {
				r.res.Error = "cancelled: " + ctx.Err().Error()
			}
			return
		}
		if r.checkLimit() {
			return
		}
		now := time.Now()
		last = max(at, since(now)/Poll*Poll)
		seen = r.hist.changes.Load()
		r.evaluations++
		ok, why, again := r.goal(r.sample(now))
		quiet = !again
		// A write of the controller restarts the settle window, unless
		// the goal lets it stay busy.
		if w := r.lastWriteAt(); ok && !r.s.Goal.Busy && !holding.IsZero() && w.After(holding) {
			holding = w
		}
		switch {
		case ok && holding.IsZero():
			holding = now
			r.hist.note(now, "goal holds")
		case !ok && !holding.IsZero():
			holding = time.Time{}
			r.hist.note(now, "goal lost: "+why)
		}
		// A run is not over while faults are still to come.
		if ok && now.Sub(holding) >= settle && now.Sub(r.start) >= r.faultsEnd() {
			r.res.Converged = true
			r.res.TimeToConverge = reports.Duration(holding.Sub(r.start))
			return
		}
		if ok {
			why = fmt.Sprintf("the goal held from %v on, short of the %v settle window", holding.Sub(r.start), settle)
		}
		if !now.Before(deadline) {
			r.res.Findings = append(r.res.Findings, reports.Finding{Check: reports.CheckGoal, Kind: reports.KindGoal, At: now, Within: reports.Duration(r.s.Timing.Deadline), Detail: why})
			return
		}
	}
}

// idleWake bounds a sleep of the goal's watcher with nothing happening, so
// the caller's Limit is still asked in real time.
const idleWake = time.Second

// faultsEnd is when the last fault window closes, from the start.
func (r *run) faultsEnd() time.Duration { return r.s.FaultsEnd() }

// goal: the scenario's expectations, the controller's own goal, and a
// live instance with nothing queued or in progress at two polls in a row.
//
// One poll is not enough: work that an event queued at the very instant
// of the poll (a pod turning ready as the ticker fires) is there or not
// depending on which goroutine ran first, on fake as on a real cluster,
// and a controller that handles it at once is quiet. Work still there a
// poll later is work.
//
// again says the next poll must look again even if nothing happened: an
// instance had work, or none led yet (an instance may take the lead, or
// show it in its probe, without a request).
func (r *run) goal(probes map[*instance]Probe) (ok bool, why string, again bool) {
	if ok, why := r.obs.goal(); !ok {
		return false, why, false
	}
	if r.judge != nil {
		if ok, why := r.judge.Goal(); !ok {
			return false, why, false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restarting > 0 {
		return false, "an instance is being replaced", false
	}
	live := 0
	work := ""
	for _, in := range r.instances {
		if in.ended {
			continue
		}
		pr, ok := probes[in]
		if !ok {
			live++
			continue
		}
		if !pr.Leading {
			continue // a standby's queue fills and waits, as it should
		}
		live++
		if pr.QueueDepth > 0 || pr.Busy {
			work = fmt.Sprintf("instance %d has work: %d queued", in.index, pr.QueueDepth)
		}
	}
	if live == 0 {
		return false, "no instance is running and leading", true
	}
	if work == "" {
		r.busyPolls = 0
		return true, "", false
	}
	r.busyPolls++
	if r.busyPolls >= 2 {
		return false, work, true
	}
	return true, "", true
}

func (r *run) lastWriteAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastWrite
}

// sample probes the instances, records their sum when it changed, and
// returns each instance's probe.
func (r *run) sample(now time.Time) map[*instance]Probe {
	r.mu.Lock()
	var total Probe
	probes := make(map[*instance]Probe, len(r.instances))
	for _, in := range r.instances {
		if p, ok := in.runner.(Prober); ok {
			pr := p.Probe()
			probes[in] = pr
			total.QueueDepth += pr.QueueDepth
			total.Reconciles += pr.Reconciles
			total.Retries += pr.Retries
		}
	}
	r.mu.Unlock()
	if len(probes) > 0 {
		r.hist.sample(reports.Sample{At: now, QueueDepth: total.QueueDepth, Reconciles: total.Reconciles, Retries: total.Retries})
	}
	return probes
}
