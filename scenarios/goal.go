package scenarios

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
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
	g := check.NewGoalClock(r.compiled, r.start)
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
			if !g.Holding().IsZero() {
				due = min(due, tick(max(since(g.Holding())+settle, since(r.start)+r.faultsEnd())))
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
		ok, why, again, lastWrite := r.goal(g, now)
		quiet = !again
		converged, missed := g.Step(now, ok, why, lastWrite, r.hist.note)
		if converged || missed != nil {
			return // the verdict reads both from the polls (package check)
		}
	}
}

// idleWake bounds a sleep of the goal's watcher with nothing happening, so
// the caller's Limit is still asked in real time.
const idleWake = time.Second

// faultsEnd is when the last fault window closes, from the start.
func (r *run) faultsEnd() time.Duration { return r.s.FaultsEnd() }

// goal records a poll at now (what the instances and the controller's
// own judge say) and answers the goal on it, with the world as seen; with
// the last write of any controller by then. Live counts the controller
// under test's instances; Work is any controller's: a world another
// controller still works on has not settled.
func (r *run) goal(g *check.GoalClock, now time.Time) (ok bool, why string, again bool, lastWrite time.Time) {
	probes := r.sample(now)
	p := reports.Poll{At: now}
	if r.judge != nil {
		if ok, why := r.judge.Goal(); !ok {
			p.Judge = cmp.Or(why, "the controller's judge says its goal does not hold")
		}
	}
	r.mu.Lock()
	p.Replacing = r.restarting > 0
	for _, in := range r.instances {
		if in.ended {
			continue
		}
		pr, ok := probes[in]
		if !ok {
			if in.ctl.primary() {
				p.Live++
			}
			continue
		}
		if !pr.Leading {
			continue // a standby's queue fills and waits, as it should
		}
		if in.ctl.primary() {
			p.Live++
		}
		if pr.QueueDepth > 0 || pr.Busy {
			p.Work = fmt.Sprintf("instance %d%s has work: %d queued", in.index, in.ctl.of(), pr.QueueDepth)
		}
	}
	r.mu.Unlock()
	h := r.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	p.Events, p.Requests = len(h.h.Events), len(h.h.Requests)
	h.h.Polls = append(h.h.Polls, p)
	ok, why, again = g.Answer(h.seen, p)
	return ok, why, again, h.lastWrite
}

// sample probes the instances, records the sum of the controller under
// test's when it changed (the samples are its alone), and returns each
// instance's probe.
func (r *run) sample(now time.Time) map[*instance]Probe {
	r.mu.Lock()
	total := Probe{CountsRetries: true}
	probes := make(map[*instance]Probe, len(r.instances))
	primary := 0
	for _, in := range r.instances {
		if pr, ok := in.probe(); ok {
			probes[in] = pr
			if !in.ctl.primary() {
				continue
			}
			primary++
			total.QueueDepth += pr.QueueDepth
			total.Reconciles += pr.Reconciles
			total.Retries += pr.Retries
			total.CountsRetries = total.CountsRetries && pr.CountsRetries
		}
	}
	r.mu.Unlock()
	if primary > 0 {
		r.hist.sample(reports.Sample{At: now, QueueDepth: total.QueueDepth, Reconciles: total.Reconciles, Retries: total.Retries, CountsRetries: total.CountsRetries})
	}
	return probes
}

// probe is in's inside: its Prober's, or else what its client-go work
// queues did, when it made a named one (see package workqueues). A queue
// fills and waits on a standby, which takes nothing from it: an instance
// that elects a leader leads once it has taken an item, or while nothing
// was added.
func (in *instance) probe() (Probe, bool) {
	if p, ok := in.runner.(Prober); ok {
		return p.Probe(), true
	}
	q := in.queues.Snapshot()
	if !q.Queues {
		return Probe{}, false
	}
	return Probe{
		Leading:       !in.elects || q.Gets > 0 || q.Adds == 0,
		QueueDepth:    int(q.Depth()),
		Busy:          q.Busy(),
		Reconciles:    q.Dones,
		Retries:       q.Retries,
		CountsRetries: true,
	}, true
}
