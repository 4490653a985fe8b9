package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
)

// The page data: what a run page and the index show, computed from
// Results alone so that a saved result renders the same way later.

// runPage is everything a run page shows.
type runPage struct {
	R      *Result
	Status string // pass, fail or error
	// Verdict is the verdict in words, one sentence per line.
	Verdict    []string
	Invariants []invariantView
	Breaks     []breakView
	Faults     []laneView
	Unfired    []string
	Events     []eventRow
	Kinds      []kindCount
	Chart      chart
	// Deployments charted, of how many.
	Shown, Total int
	WritesTotal  int
	Generated    string
}

type invariantView struct {
	Name string
	Held bool
	// Break is the first violation, when it did not hold.
	Break *breakView
}

// breakView is a violation with the fault that preceded it.
type breakView struct {
	Violation
	T float64 // seconds from the start
	// Preceded is the last fault that fired at or before the violation;
	// nil when none had.
	Preceded *chaos.Firing
	Before   time.Duration // from that firing to the violation
	PT       float64       // its instant, seconds from the start
}

// laneView is one fault of the plan (or, with no plan, one fault that
// fired) as the timeline draws it.
type laneView struct {
	Name    string
	Spec    *chaos.Spec
	Windows []span // declared windows, seconds from the start
	Firings []float64
	Fired   int
	First   string // the first firing, in words
}

type span struct{ From, To float64 }

// eventRow is one line of the event log.
type eventRow struct {
	T     float64
	Kind  string // request, watch, fault, controller, harness, violation
	Class string // for the eye: ok, 409, 429, expired, server, error
	Text  string
}

type kindCount struct {
	Kind string
	N    int
}

// secs is t as seconds from the run's start.
func (r *Result) secs(t time.Time) float64 { return t.Sub(r.Started).Seconds() }

// end is the run's last instant, in seconds from its start.
func (r *Result) end() float64 {
	end := time.Duration(r.Simulated).Seconds()
	last := func(t time.Time) {
		if s := r.secs(t); s > end {
			end = s
		}
	}
	h := r.History
	if n := len(h.Requests); n > 0 {
		last(h.Requests[n-1].At)
	}
	if n := len(h.Log); n > 0 {
		last(h.Log[n-1].At)
	}
	if end <= 0 {
		end = 1
	}
	return end
}

func status(r *Result) string {
	switch {
	case r.Error != "":
		return "error"
	case r.Skipped() != "":
		return "skipped"
	case r.Pass:
		return "pass"
	}
	return "fail"
}

// buildRunPage computes a run page's data.
func buildRunPage(r *Result) *runPage {
	p := &runPage{R: r, Status: status(r), Unfired: r.Unfired}
	for _, n := range r.Counters.Writes {
		p.WritesTotal += n
	}
	p.Faults = lanes(r)
	p.Breaks = breaks(r)
	p.Invariants = invariants(r, p.Breaks)
	p.Verdict = verdict(r, p)
	p.Events = events(r)
	counts := map[string]int{}
	for _, e := range p.Events {
		counts[e.Kind]++
	}
	for _, k := range []string{"violation", "fault", "request", "watch", "controller", "harness"} {
		p.Kinds = append(p.Kinds, kindCount{k, counts[k]})
	}
	return p
}

// lanes is one lane per fault of the plan, with its declared windows and
// its firings; firings of faults outside the plan (a process's exit) get
// lanes of their own.
func lanes(r *Result) []laneView {
	end := r.end()
	var out []laneView
	claimed := make([]bool, len(r.History.Faults))
	for i := range r.Plan {
		spec := &r.Plan[i]
		l := laneView{Name: laneName(*spec), Spec: spec}
		if w, ok := window(spec.When, end); ok {
			l.Windows = append(l.Windows, w)
		}
		in, err := spec.Build()
		for j, f := range r.History.Faults {
			if claimed[j] || f.Fault != spec.Fault || (err == nil && !f.Target.Equal(in.Fault.Target())) {
				continue
			}
			claimed[j] = true
			l.add(r, f)
		}
		out = append(out, l)
	}
	byName := map[string]int{}
	for j, f := range r.History.Faults {
		if claimed[j] {
			continue
		}
		i, ok := byName[f.Fault]
		if !ok {
			i = len(out)
			byName[f.Fault] = i
			out = append(out, laneView{Name: f.Fault})
		}
		out[i].add(r, f)
	}
	return out
}

func (l *laneView) add(r *Result, f chaos.Firing) {
	l.Fired++
	l.Firings = append(l.Firings, r.secs(f.At))
	if l.First == "" {
		l.First = fmt.Sprintf("%s: %s", f.Request, f.Outcome)
	}
}

// window is the span a When declares, if it declares one: a fault bound to
// the k-th match or a count has no window, only firings.
func window(w chaos.When, end float64) (span, bool) {
	from := w.After.Seconds()
	to := end
	if w.Until > 0 {
		to = min(w.Until.Seconds(), end)
	}
	if w.Until == 0 && (w.Nth > 0 || w.Count > 0 || w.Every > 0) {
		return span{}, false
	}
	if to <= from {
		return span{}, false
	}
	return span{from, to}, true
}

// laneName is "conflict on patch,update deployments/web-1 (p=0.5)".
func laneName(s chaos.Spec) string {
	var b strings.Builder
	b.WriteString(s.Fault)
	t := s.Target
	if !t.IsZero() {
		b.WriteString(" on")
		if len(t.Verbs) > 0 {
			b.WriteString(" " + strings.Join(t.Verbs, ","))
		}
		if t.Resource != "" {
			b.WriteString(" " + t.Resource)
		}
		if t.Name != "" {
			b.WriteString("/" + t.Name)
		}
	}
	switch w := s.When; {
	case w.Nth > 0:
		fmt.Fprintf(&b, " (match %d)", w.Nth)
	case w.Probability > 0:
		fmt.Fprintf(&b, " (p=%g)", w.Probability)
	}
	return b.String()
}

// breaks pairs each violation with the last fault that fired before it.
func breaks(r *Result) []breakView {
	var out []breakView
	for _, v := range r.Violations {
		b := breakView{Violation: v, T: r.secs(v.At)}
		for i := range r.History.Faults {
			f := &r.History.Faults[i]
			if f.At.After(v.At) {
				continue
			}
			if b.Preceded == nil || !f.At.Before(b.Preceded.At) {
				b.Preceded = f
			}
		}
		if b.Preceded != nil {
			b.Before = v.At.Sub(b.Preceded.At)
			b.PT = r.secs(b.Preceded.At)
		}
		out = append(out, b)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func invariants(r *Result, bs []breakView) []invariantView {
	names := slices.Clone(r.Invariants)
	for _, b := range bs {
		if !slices.Contains(names, b.Invariant) {
			names = append(names, b.Invariant)
		}
	}
	var out []invariantView
	for _, n := range names {
		iv := invariantView{Name: n, Held: true}
		for i := range bs {
			if bs[i].Invariant == n {
				iv.Held, iv.Break = false, &bs[i]
				break
			}
		}
		out = append(out, iv)
	}
	// Broken first, then in the order the run gave.
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Held && out[j].Held })
	return out
}

// verdict says in words what held and what broke.
func verdict(r *Result, p *runPage) []string {
	var out []string
	switch p.Status {
	case "error":
		return []string{"The run could not be carried out: " + r.Error}
	case "skipped":
		return []string{"Skipped: " + r.Skipped() + "."}
	case "pass":
		out = append(out, fmt.Sprintf("Passed: every invariant held, and the goal held for %v from %v on.", time.Duration(r.Settle), time.Duration(r.TimeToConverge)))
	default:
		out = append(out, fmt.Sprintf("Failed: %d reason(s).", len(r.Reasons)))
	}
	if len(p.Breaks) > 0 {
		b := p.Breaks[0]
		s := fmt.Sprintf("First broken: %s at %s", b.Invariant, secs(b.T))
		if b.Object != "" {
			s += " on " + b.Object
		}
		if b.Request != "" {
			s += ", by " + b.Request
		}
		s += "."
		if b.Preceded != nil {
			s += fmt.Sprintf(" The fault before it: %s (%s), %v earlier.", b.Preceded.Fault, b.Preceded.Request, b.Before.Round(time.Millisecond))
		} else {
			s += " No fault had fired yet."
		}
		out = append(out, s)
	}
	if !r.Converged && r.Error == "" {
		out = append(out, "The goal did not hold for the settle window before the deadline.")
	} else if r.Converged && p.Status == "fail" {
		out = append(out, fmt.Sprintf("The goal held from %v on.", time.Duration(r.TimeToConverge)))
	}
	held := 0
	for _, iv := range p.Invariants {
		if iv.Held {
			held++
		}
	}
	s := fmt.Sprintf("%d of %d invariants held; %d faults fired; %d writes", held, len(p.Invariants), r.Counters.Faults, p.WritesTotal)
	if r.Counters.Reconciles >= 0 {
		s += fmt.Sprintf(", %d reconciles", r.Counters.Reconciles)
	}
	out = append(out, s+".")
	return out
}

// events merges the history into one log, in time order.
func events(r *Result) []eventRow {
	h := r.History
	out := make([]eventRow, 0, len(h.Requests)+len(h.Events)+len(h.Faults)+len(h.Samples)+len(h.Log)+len(r.Violations))
	for _, q := range h.Requests {
		text := fmt.Sprintf("#%d %s", q.Instance, q)
		if q.Error != "" {
			text += ": " + q.Error
		}
		out = append(out, eventRow{T: r.secs(q.At), Kind: "request", Class: codeClass(q.Code), Text: text})
	}
	for _, e := range h.Events {
		out = append(out, eventRow{T: r.secs(e.At), Kind: "watch", Text: fmt.Sprintf("%s %s/%s rv=%s", e.Type, e.Resource, e.Name, e.RV)})
	}
	for _, f := range h.Faults {
		text := fmt.Sprintf("%s: %s: %s", f.Fault, f.Request, f.Outcome)
		if f.Match > 0 {
			text = fmt.Sprintf("%s (match %d): %s: %s", f.Fault, f.Match, f.Request, f.Outcome)
		}
		out = append(out, eventRow{T: r.secs(f.At), Kind: "fault", Class: "fault", Text: text})
	}
	var prev Sample
	for _, s := range h.Samples {
		if s.Reconciles == prev.Reconciles && s.Retries == prev.Retries && s.QueueDepth == prev.QueueDepth {
			continue
		}
		text := fmt.Sprintf("queue %d, reconciles %d", s.QueueDepth, s.Reconciles)
		if d := s.Reconciles - prev.Reconciles; d > 0 {
			text += fmt.Sprintf(" (+%d)", d)
		}
		if s.Retries > 0 {
			text += fmt.Sprintf(", retries %d", s.Retries)
		}
		out = append(out, eventRow{T: r.secs(s.At), Kind: "controller", Text: text})
		prev = s
	}
	for _, e := range h.Log {
		out = append(out, eventRow{T: r.secs(e.At), Kind: "harness", Text: e.What})
	}
	for _, v := range r.Violations {
		text := fmt.Sprintf("%s: %s", v.Invariant, v.Detail)
		if v.Object != "" {
			text += " [" + v.Object + "]"
		}
		if v.Request != "" {
			text += " by " + v.Request
		}
		out = append(out, eventRow{T: r.secs(v.At), Kind: "violation", Class: "violation", Text: text})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// codeClass names a status code's class for the eye.
func codeClass(code int) string {
	switch {
	case code == 0:
		return "error"
	case code == 409:
		return "409"
	case code == 429:
		return "429"
	case code == 410:
		return "expired"
	case code >= 500:
		return "server"
	case code >= 400:
		return "client"
	}
	return "ok"
}

// secs formats seconds from the start as "12.345s".
func secs(t float64) string { return fmt.Sprintf("%.3fs", t) }

// indexRow is one run in the index.
type indexRow struct {
	R          *Result
	Status     string
	Link       string
	Writes     int
	Reason     string
	Ratio      float64
	Simulated  float64
	Wall       float64
	Converge   float64 // seconds; -1 when it did not converge
	Violations int
}

func buildIndex(results []*Result, link func(*Result) string) []indexRow {
	rows := make([]indexRow, 0, len(results))
	for _, r := range results {
		row := indexRow{R: r, Status: status(r), Link: link(r), Converge: -1,
			Simulated: time.Duration(r.Simulated).Seconds(), Wall: time.Duration(r.Wall).Seconds(), Violations: len(r.Violations)}
		for _, n := range r.Counters.Writes {
			row.Writes += n
		}
		if r.Converged {
			row.Converge = time.Duration(r.TimeToConverge).Seconds()
		}
		if row.Wall > 0 {
			row.Ratio = row.Simulated / row.Wall
		}
		switch {
		case r.Error != "":
			row.Reason = r.Error
		case len(r.Reasons) > 0:
			row.Reason = r.Reasons[0]
		}
		rows = append(rows, row)
	}
	// Failures first, then by name.
	rank := map[string]int{"error": 0, "fail": 1, "pass": 2, "skipped": 3}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if rank[a.Status] != rank[b.Status] {
			return rank[a.Status] < rank[b.Status]
		}
		return a.R.FileName() < b.R.FileName()
	})
	return rows
}
