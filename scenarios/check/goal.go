package check

import (
	"errors"
	"fmt"
	"time"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

func goal() Check {
	return Check{
		Name: reports.CheckGoal, Kind: reports.KindGoal,
		Catches: "a world that did not converge: the scenario's goal (and the controller's own judge's, and a live instance with no work two polls in a row) did not hold for the settle window, after the controller's last write and the last fault, before the deadline. With other controllers in the scenario, the live instance is the controller under test's, and any controller's work or write keeps the world from having settled.",
		Reads:   "the world as seen at each poll of the goal (History.Polls, History.Events) and the controllers' writes (History.Requests)",
		judge:   judgeGoal,
	}
}

// judgeGoal judges the goal at each poll: the scenario's expectations on
// the world as seen then, the controller's own judge and its instances as
// they said then.
func judgeGoal(j *judging) {
	g := NewGoalClock(j.c, j.h.Start)
	w := NewSeen(j.h.Resources)
	var lastWrite time.Time
	n := 0
	for _, p := range j.h.Polls {
		w.UpTo(j.h.Events, p.Events)
		ok, why, _ := g.Answer(w, p)
		for ; n < min(p.Requests, len(j.h.Requests)); n++ {
			if SuccessfulWrite(j.h.Requests[n]) {
				lastWrite = j.h.Requests[n].At
			}
		}
		converged, missed := g.Step(p.At, ok, why, lastWrite, nil)
		switch {
		case converged:
			j.v.Converged, j.v.TimeToConverge, j.v.Decided = true, g.holding.Sub(g.start), true
			return
		case missed != nil:
			j.find(*missed)
			j.v.Decided = true
			return
		}
	}
}

// GoalClock follows the goal from poll to poll: since when it has held,
// and how many polls in a row an instance had work.
//
// Instants are taken on the wall clock (Round(0) drops a monotonic
// reading): a saved history has no monotonic readings, and the goal must
// come out the same from it as during the run.
type GoalClock struct {
	c                 *Compiled
	start, deadline   time.Time
	settle, faultsEnd time.Duration
	holding           time.Time
	busyPolls         int
}

// NewGoalClock starts following c's goal from a run's start.
func NewGoalClock(c *Compiled, start time.Time) *GoalClock {
	start = start.Round(0)
	return &GoalClock{c: c, start: start, deadline: start.Add(c.Deadline), settle: c.Settle, faultsEnd: c.FaultsEnd}
}

// Holding is since when the goal has held; zero when it does not.
func (g *GoalClock) Holding() time.Time { return g.holding }

// Answer is the goal at poll p: the scenario's expectations on the world
// seen, the controller's own judge, and a live instance with nothing
// queued or in progress at two polls in a row.
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
func (g *GoalClock) Answer(w *Seen, p reports.Poll) (ok bool, why string, again bool) {
	if ok, why := g.c.goalHolds(w); !ok {
		return false, why, false
	}
	switch {
	case p.Judge != "":
		return false, p.Judge, false
	case p.Replacing:
		return false, "an instance is being replaced", false
	case p.Live == 0:
		return false, "no instance is running and leading", true
	case p.Work == "":
		g.busyPolls = 0
		return true, "", false
	}
	g.busyPolls++
	if g.busyPolls >= 2 {
		return false, p.Work, true
	}
	return true, "", true
}

// Step takes the goal's answer at at, with the controller's last write
// before it: converged once it has held for the settle window past the
// faults, or the goal's finding once the deadline has passed. A write of
// the controller restarts the settle window, unless the goal lets it stay
// busy. note, when not nil, hears when the goal starts to hold and when
// it is lost.
func (g *GoalClock) Step(at time.Time, ok bool, why string, lastWrite time.Time, note func(time.Time, string)) (converged bool, missed *reports.Finding) {
	at, lastWrite = at.Round(0), lastWrite.Round(0)
	if ok && !g.c.Busy && !g.holding.IsZero() && lastWrite.After(g.holding) {
		g.holding = lastWrite
	}
	switch {
	case ok && g.holding.IsZero():
		g.holding = at
		if note != nil {
			note(at, "goal holds")
		}
	case !ok && !g.holding.IsZero():
		g.holding = time.Time{}
		if note != nil {
			note(at, "goal lost: "+why)
		}
	}
	// A run is not over while faults are still to come.
	if ok && at.Sub(g.holding) >= g.settle && at.Sub(g.start) >= g.faultsEnd {
		return true, nil
	}
	if ok {
		why = fmt.Sprintf("the goal held from %v on, short of the %v settle window", g.holding.Sub(g.start), g.settle)
	}
	if !at.Before(g.deadline) {
		return false, &reports.Finding{Check: reports.CheckGoal, Kind: reports.KindGoal, At: at, Within: reports.Duration(g.deadline.Sub(g.start)), Detail: why}
	}
	return false, nil
}

// goalHolds judges the scenario's expectations on the objects seen.
func (c *Compiled) goalHolds(w *Seen) (bool, string) {
	for i, e := range c.goals {
		objs := w.Selected(e.Select)
		what := describe(e.Select)
		if e.Count != nil {
			if len(objs) != *e.Count {
				return false, fmt.Sprintf("goal.objects[%d]: %d %s, want %d", i, len(objs), what, *e.Count)
			}
		} else if len(objs) == 0 {
			return false, fmt.Sprintf("goal.objects[%d]: no %s yet", i, what)
		}
		var objects map[string]any // what an across condition reads, once per poll
		if e.expr != nil && e.expr.Across() {
			objects = w.ByKind(e.kinds)
		}
		for _, u := range objs {
			if e.Match != nil {
				if ms := expect.Match(e.Match, u.Object); len(ms) > 0 {
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s", i, u.GetKind(), u.GetName(), ms[0])
				}
			}
			if e.expr != nil {
				var held bool
				var err error
				if e.expr.Across() {
					held, err = e.expr.EvalAcross(u.Object, objects)
				} else {
					held, err = e.expr.Eval(u.Object, nil)
				}
				switch {
				case errors.Is(err, expect.ErrMissing):
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %v", i, u.GetKind(), u.GetName(), err)
				case err != nil:
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s cannot be evaluated: %v", i, u.GetKind(), u.GetName(), e.Condition, err)
				case !held:
					return false, fmt.Sprintf("goal.objects[%d]: %s %s: %s is false", i, u.GetKind(), u.GetName(), e.Condition)
				}
			}
		}
	}
	return true, ""
}

// describe is "Deployments web-0" or "Deployments app=web".
func describe(sel Selector) string {
	what := sel.Kind
	if sel.Name != "" {
		what += " " + sel.Name
	}
	if sel.Labels != "" {
		what += " (" + sel.Labels + ")"
	}
	return what
}
