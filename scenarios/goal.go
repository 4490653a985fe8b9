package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-lab/converge/reports"
)

// watchGoal polls the goal until it has held for the settle window or the
// deadline passed.
func (r *run) watchGoal(ctx context.Context) {
	deadline := r.start.Add(time.Duration(r.s.Timing.Deadline))
	settle := time.Duration(r.s.Timing.Settle)
	var holding time.Time
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !r.aborted.Load() {
				r.res.Error = "cancelled: " + ctx.Err().Error()
			}
			return
		case <-tick.C:
		}
		if r.checkLimit() {
			return
		}
		now := time.Now()
		r.sample(now)
		ok, why := r.goal()
		// A write of the controller restarts the settle window, unless
		// the goal lets it stay busy.
		if w := r.lastWriteAt(); ok && !r.s.Goal.Busy && !holding.IsZero() && w.After(holding) {
			holding = w
		}
		switch {
		case ok && holding.IsZero():
			holding = now
			r.hist.log(now, "goal holds")
		case !ok && !holding.IsZero():
			holding = time.Time{}
			r.hist.log(now, "goal lost: "+why)
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
			r.res.Reasons = append(r.res.Reasons, fmt.Sprintf("did not converge within %v: %s", time.Duration(r.s.Timing.Deadline), why))
			return
		}
	}
}

// faultsEnd is when the last fault window closes, from the start.
func (r *run) faultsEnd() time.Duration {
	var end time.Duration
	for _, f := range r.s.Faults {
		w := f.When
		switch {
		case w.Until > 0:
			end = max(end, w.Until)
		case w.Every > 0 && w.Count > 0:
			end = max(end, w.After+w.Every*time.Duration(w.Count-1))
		default:
			end = max(end, w.After)
		}
	}
	return end
}

// goal: the scenario's expectations, the controller's own goal, and a
// live instance with nothing queued or in progress at two polls in a row.
//
// One poll is not enough: work that an event queued at the very instant
// of the poll (a pod turning ready as the ticker fires) is there or not
// depending on which goroutine ran first, on fake as on a real cluster,
// and a controller that handles it at once is quiet. Work still there a
// poll later is work.
func (r *run) goal() (bool, string) {
	if ok, why := r.obs.goal(); !ok {
		return false, why
	}
	if r.judge != nil {
		if ok, why := r.judge.Goal(); !ok {
			return false, why
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restarting > 0 {
		return false, "an instance is being replaced"
	}
	live := 0
	busy := ""
	for _, in := range r.instances {
		if in.ended {
			continue
		}
		p, ok := in.runner.(Prober)
		if !ok {
			live++
			continue
		}
		pr := p.Probe()
		if !pr.Leading {
			continue // a standby's queue fills and waits, as it should
		}
		live++
		if pr.QueueDepth > 0 || pr.Busy {
			busy = fmt.Sprintf("instance %d has work: %d queued", in.index, pr.QueueDepth)
		}
	}
	if live == 0 {
		return false, "no instance is running and leading"
	}
	if busy == "" {
		r.busyPolls = 0
		return true, ""
	}
	r.busyPolls++
	if r.busyPolls >= 2 {
		return false, busy
	}
	return true, ""
}

func (r *run) lastWriteAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastWrite
}

// sample records the controllers' probes when they changed.
func (r *run) sample(now time.Time) {
	r.mu.Lock()
	var total Probe
	probed := false
	for _, in := range r.instances {
		if p, ok := in.runner.(Prober); ok {
			pr := p.Probe()
			total.QueueDepth += pr.QueueDepth
			total.Reconciles += pr.Reconciles
			total.Retries += pr.Retries
			probed = true
		}
	}
	r.mu.Unlock()
	if probed {
		r.hist.sample(reports.Sample{At: now, QueueDepth: total.QueueDepth, Reconciles: total.Reconciles, Retries: total.Retries})
	}
}
