package explore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
)

// Tries is how many seeded runs judge a candidate schedule. Goroutine
// order is not fixed, so one run is not enough: a candidate fails when it
// fails in as many of its Tries runs as the schedule shrinking started
// from did (at least one), so a failure seen in every run shrinks to a
// cause seen in every run, not to a fault that fails one run in three.
const Tries = 3

// DefaultShrinkRuns bounds the runs one shrinking makes.
const DefaultShrinkRuns = 400

// Fails runs the scenario with faults in up to Tries seeded runs and
// returns the seeds of the runs that failed and how many runs it made. It
// may stop once need runs failed, or once need can no longer be reached;
// need <= 0 asks for all Tries. A run that could not be carried out is an
// error, not a failure.
type Fails func(faults []chaos.Spec, need int) (failed []uint64, runs int, err error)

// Shrunk is the outcome of a shrinking.
type Shrunk struct {
	// From is the schedule shrinking started from: the firings of the
	// failing run, one fault each, or the scenario's faults when those do
	// not fail on their own.
	From []chaos.Spec `json:"from"`
	// FromFirings: From is the firings, not the scenario's faults.
	FromFirings bool `json:"fromFirings"`
	// Faults is the 1-minimal schedule: it fails, and without any one of
	// its faults it does not.
	Faults []chaos.Spec `json:"faults"`
	// Need is how many of a candidate's Tries runs had to fail for it to
	// count as failing: as many as From's did.
	Need int `json:"need"`
	// Seed is the seed of a run of Faults that failed: the one to replay.
	Seed uint64 `json:"seed"`
	// Runs is how many runs shrinking took (cached candidates not
	// counted twice); Candidates how many schedules it tried.
	Runs       int  `json:"runs"`
	Candidates int  `json:"candidates"`
	Exhausted  bool `json:"exhausted,omitempty"` // the run budget ran out first
}

// Shrinker reduces a failing schedule with delta debugging (ddmin over
// its faults, complements first), then simplifies each remaining fault
// (earlier, a shorter window or delay, fewer firings), and repeats both to
// a fixed point.
type Shrinker struct {
	Fails Fails
	// MaxCandidates bounds the schedules tried; zero means
	// DefaultShrinkRuns / Tries.
	MaxCandidates int

	need  int
	cache map[string]outcome
	tried int
	runs  int
	err   error
}

// outcome is a tried candidate's: whether it counted as failing, and a
// seed whose run failed.
type outcome struct {
	fails bool
	seed  uint64
}

var errBudget = errors.New("the shrinking budget ran out")

// test reports whether faults fail in at least s.need of their runs,
// from the cache when they were tried.
func (s *Shrinker) test(faults []chaos.Spec) bool {
	return s.try(faults, s.need).fails
}

func (s *Shrinker) try(faults []chaos.Spec, need int) outcome {
	if s.err != nil {
		return outcome{}
	}
	key := canonical(faults)
	if v, ok := s.cache[key]; ok {
		return v
	}
	if s.tried >= s.MaxCandidates {
		s.err = errBudget
		return outcome{}
	}
	s.tried++
	failed, runs, err := s.Fails(faults, need)
	s.runs += runs
	if err != nil {
		s.err = err
		return outcome{}
	}
	var o outcome
	if len(failed) > 0 {
		o = outcome{fails: len(failed) >= max(need, 1), seed: failed[0]}
	}
	s.cache[key] = o
	return o
}

// start tries faults, the schedule shrinking may start from, in all Tries
// runs, and sets the failures a candidate needs from them.
func (s *Shrinker) start(faults []chaos.Spec) bool {
	if s.err != nil || s.tried >= s.MaxCandidates {
		return s.test(faults)
	}
	s.tried++
	failed, runs, err := s.Fails(faults, 0)
	s.runs += runs
	if err != nil {
		s.err = err
		return false
	}
	if len(failed) == 0 {
		s.cache[canonical(faults)] = outcome{}
		return false
	}
	s.need = len(failed)
	s.cache[canonical(faults)] = outcome{fails: true, seed: failed[0]}
	return true
}

func canonical(faults []chaos.Spec) string {
	b, _ := json.Marshal(faults)
	return string(b)
}

// Shrink shrinks r, a failing run: first the schedule of what fired in it
// (each firing as a fault aimed at its request at its instant), falling
// back to the scenario's own faults when that does not fail.
func (s *Shrinker) Shrink(r *reports.Result) (*Shrunk, error) {
	if s.Fails == nil {
		return nil, errors.New("no way to run a candidate")
	}
	if s.MaxCandidates == 0 {
		s.MaxCandidates = DefaultShrinkRuns / Tries
	}
	s.cache = map[string]outcome{}
	s.need = 1
	if r.Pass {
		return nil, errors.New("the run passed: there is nothing to shrink")
	}
	if r.Error != "" {
		return nil, fmt.Errorf("the run could not be carried out (%s): there is nothing to shrink", text.FirstLine(r.Error))
	}
	from := Firings(r)
	fromFirings := len(from) > 0 && s.start(from)
	if !fromFirings {
		from = slices.Clone(r.Plan)
		if len(from) == 0 {
			return nil, errors.New("the run fails with no fault at all: there is nothing to shrink")
		}
		if !s.start(from) {
			if s.err != nil {
				return nil, s.err
			}
			return nil, fmt.Errorf("the run's faults do not fail in %d seeded runs: the failure did not reproduce", Tries)
		}
	}
	out := &Shrunk{From: from, FromFirings: fromFirings, Need: s.need}
	cur := from
	if s.test(nil) {
		cur = nil
	} else {
		for {
			next := s.simplify(s.ddmin(cur))
			if canonical(next) == canonical(cur) || s.err != nil {
				cur = next
				break
			}
			cur = next
		}
	}
	out.Faults = cur
	out.Seed = s.cache[canonical(cur)].seed
	out.Candidates = s.tried
	out.Runs = s.runs
	if errors.Is(s.err, errBudget) {
		out.Exhausted = true
	} else if s.err != nil {
		return nil, s.err
	}
	return out, nil
}

// ddmin is Zeller's delta debugging: split into n chunks; a failing chunk
// or complement replaces the set; otherwise split finer.
func (s *Shrinker) ddmin(c []chaos.Spec) []chaos.Spec {
	n := 2
	for len(c) >= 2 {
		chunks := split(c, n)
		reduced := false
		// Complements first: faults interact.
		for i := range chunks {
			comp := complement(chunks, i)
			if len(comp) > 0 && s.test(comp) {
				c, n, reduced = comp, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			for _, ch := range chunks {
				if s.test(ch) {
					c, n, reduced = ch, 2, true
					break
				}
			}
		}
		if s.err != nil {
			return c
		}
		if !reduced {
			if n >= len(c) {
				return c
			}
			n = min(2*n, len(c))
		}
	}
	return c
}

func split(c []chaos.Spec, n int) [][]chaos.Spec {
	var out [][]chaos.Spec
	for i := range n {
		lo, hi := i*len(c)/n, (i+1)*len(c)/n
		if hi > lo {
			out = append(out, slices.Clone(c[lo:hi]))
		}
	}
	return out
}

func complement(chunks [][]chaos.Spec, skip int) []chaos.Spec {
	var out []chaos.Spec
	for i, ch := range chunks {
		if i != skip {
			out = append(out, ch...)
		}
	}
	return out
}

// simplify tries simpler versions of each fault, keeping each that still
// fails: no start bound, then an earlier one; no end bound, or a shorter
// window; half the delay; fewer firings.
func (s *Shrinker) simplify(c []chaos.Spec) []chaos.Spec {
	c = slices.Clone(c)
	for i := range c {
		for _, simpler := range simpler(c[i]) {
			cand := slices.Clone(c)
			cand[i] = simpler
			if s.test(cand) {
				c = cand
			}
			if s.err != nil {
				return c
			}
		}
	}
	return c
}

// simpler lists candidates simpler than f, most ambitious first.
func simpler(f chaos.Spec) []chaos.Spec {
	var out []chaos.Spec
	with := func(change func(*chaos.Spec)) {
		g := f
		g.Target.Verbs = slices.Clone(f.Target.Verbs)
		change(&g)
		out = append(out, g)
	}
	w := f.When
	if w.After > 0 {
		with(func(g *chaos.Spec) { g.When.After = 0 })
		with(func(g *chaos.Spec) { g.When.After = (w.After / 2).Truncate(10 * time.Millisecond) })
	}
	if w.Until > 0 {
		with(func(g *chaos.Spec) { g.When.Until = 0 })
		if span := w.Until - w.After; span > 20*time.Millisecond {
			with(func(g *chaos.Spec) { g.When.Until = w.After + (span / 2).Truncate(10*time.Millisecond) })
		}
	}
	if f.Delay > 20*time.Millisecond {
		with(func(g *chaos.Spec) { g.Delay = (f.Delay / 2).Truncate(10 * time.Millisecond) })
	}
	if w.Count > 1 {
		with(func(g *chaos.Spec) { g.When.Count = 1 })
		with(func(g *chaos.Spec) { g.When.Count = w.Count / 2 })
	}
	if w.Probability > 0 && w.Probability < 1 {
		with(func(g *chaos.Spec) { g.When.Probability = 0 })
	}
	return out
}

// Firings is what fired in r, each firing as a fault of its own aimed at
// the request (or watched object) it fired on, from the instant it fired:
// "the first patch of deployments/web-1 from 2.1 s on". Firings that no
// request set off (a window opening, a schedule) keep their fault's own
// target and fire once from their instant.
func Firings(r *reports.Result) []chaos.Spec {
	var out []chaos.Spec
	for _, f := range r.History.Faults {
		spec, ok := specOf(r.Plan, f)
		if !ok {
			continue
		}
		at := f.At.Sub(r.Started).Truncate(time.Millisecond)
		if spec.Fault == chaos.FaultTimeTravel || spec.Fault == chaos.FaultStaleRead {
			// A view is of the whole target, and of the instance it
			// fired in: the lists after the firing are served from it.
			if strings.HasPrefix(f.Outcome, "passed on") {
				continue
			}
			spec.When = chaos.When{After: at, Count: 1, Restarted: spec.When.Restarted}
			out = append(out, spec)
			continue
		}
		spec.When = chaos.When{After: at, Count: 1}
		if t, ok := targetOf(f.Request); ok && f.Match > 0 {
			spec.Target = t
		} else if spec.Fault == chaos.FaultPartition {
			// A window: as long as the scenario's.
			orig, _ := specOf(r.Plan, f)
			if orig.When.Until > 0 {
				spec.When = chaos.When{After: at, Until: at + orig.When.Until - orig.When.After}
			} else {
				spec.When = chaos.When{After: at}
			}
		}
		out = append(out, spec)
	}
	return out
}

// specOf is the fault of plan that f came from.
func specOf(plan []chaos.Spec, f chaos.Firing) (chaos.Spec, bool) {
	for _, s := range plan {
		if s.Fault == f.Fault && s.Target.Equal(f.Target) {
			return s, true
		}
	}
	for _, s := range plan {
		if s.Fault == f.Fault {
			return s, true
		}
	}
	return chaos.Spec{}, false
}

// targetOf reads a firing's request back into a target: "patch
// deployments ns/web-1", "update deployments/status ns/web-1" or, for a
// watch frame, "ADDED watch pods ns/web-1-x".
func targetOf(request string) (chaos.Target, bool) {
	fields := strings.Fields(request)
	if len(fields) > 0 && strings.ToUpper(fields[0]) == fields[0] && len(fields) >= 3 && fields[1] == "watch" {
		// A frame: aim at the object, whatever the stream.
		t := chaos.Target{Resource: base(fields[2])}
		if len(fields) == 4 {
			t.Name = nameOf(fields[3])
		}
		return t, true
	}
	if len(fields) < 2 || !slices.Contains(chaos.Verbs, fields[0]) {
		return chaos.Target{}, false
	}
	t := chaos.Target{Verbs: []string{fields[0]}, Resource: base(fields[1])}
	if len(fields) == 3 {
		t.Name = nameOf(fields[2])
	}
	return t, true
}

// nameOf is the name of "namespace/name": a run's objects are all in its
// namespace, which another run names otherwise.
func nameOf(obj string) string {
	if _, n, ok := strings.Cut(obj, "/"); ok {
		return n
	}
	return obj
}
