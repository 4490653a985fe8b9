package explore

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
)

// ExplorationSchema versions the exploration file.
const ExplorationSchema = "converge.dev/exploration/v1"

// Exploration is what an exploration found.
type Exploration struct {
	Schema     string `json:"schema"`
	Scenario   string `json:"scenario"`
	Controller string `json:"controller"`
	Backend    string `json:"backend"`
	Seed       uint64 `json:"seed"`
	// References are the seeds of the fault-free runs, and the reasons
	// any of them failed: a controller that fails with no fault at all.
	References []uint64  `json:"references"`
	Coverage   Coverage  `json:"coverage"`
	Findings   []Finding `json:"findings"`
	// Outcomes are every point's run, in the plan's order;
	// ReferenceOutcomes the reference runs'.
	Outcomes          []Outcome `json:"outcomes"`
	ReferenceOutcomes []Outcome `json:"referenceOutcomes"`
	Masks             Masks     `json:"masks"`
	Learned           Masks     `json:"learned"`
	// Noise is what the references disagreed on, which no point was
	// judged by.
	Noise Noise `json:"noise"`
	// Wall is how long the exploration took, references included.
	Wall reports.Duration `json:"wall"`
}

// Coverage counts the points at each stage.
type Coverage struct {
	Found  map[string]int `json:"found"`
	Steps  []Step         `json:"steps"`
	Points int            `json:"points"`
	// Inputs are the input points, when the inputs were explored.
	Inputs int `json:"inputs,omitempty"`
	Run    int `json:"run"`
	// Unfired points' faults never fired: the run did not meet the moment
	// the reference had (another order of events).
	Unfired int `json:"unfired"`
	// Errors are runs that could not be carried out.
	Errors int `json:"errors"`
}

// Outcome is one point's run.
type Outcome struct {
	Point  Point  `json:"point"`
	Result string `json:"result,omitempty"` // the result file, from the report folder
	// Page says the process that ran the point wrote Result's page too
	// (reports.WritePage), so a report reads only its summary.
	Page        bool             `json:"page,omitempty"`
	File        string           `json:"file,omitempty"` // the point\'s scenario file
	Fired       bool             `json:"fired"`
	Error       string           `json:"error,omitempty"`
	Differences []Difference     `json:"differences,omitempty"`
	Replay      string           `json:"replay,omitempty"`
	Wall        reports.Duration `json:"wall"`
	// Shrunk is the smallest point found to fail as this one did, and its
	// outcome (Plan.ShrinkInput), when it is smaller; ShrinkRuns how many
	// candidates shrinking ran.
	Shrunk     *Outcome `json:"shrunk,omitempty"`
	ShrinkRuns int      `json:"shrinkRuns,omitempty"`
}

// Finding is one way runs differed from the references, and the points
// that made them differ so.
type Finding struct {
	Oracle string `json:"oracle"`
	Kind   string `json:"kind,omitempty"`
	Field  string `json:"field,omitempty"`
	// Detail is the first difference of the smallest point.
	Detail string `json:"detail"`
	// Smallest is the point to look at first: the earliest in the
	// reference run of those with a fault of the simplest class.
	Smallest Outcome `json:"smallest"`
	// Points are the IDs of every point whose run differed so.
	Points []string `json:"points"`
}

// Name is "verdict invariant no-panic", what the finding is about.
func (f Finding) Name() string {
	return strings.TrimSpace(f.Oracle + " " + f.Kind + " " + f.Field)
}

// Outcome judges one point's run.
func (p *Plan) Outcome(pt Point, r *reports.Result, file string) Outcome {
	o := Outcome{Point: pt, Result: file, Replay: r.Replay, Wall: r.Wall, Fired: len(r.History.Faults) > 0}
	switch {
	case r.Error != "":
		o.Error = text.FirstLine(r.Error)
	case o.Fired:
		o.Differences = p.Judge(r)
	}
	return o
}

// RefOutcome judges a reference run by its verdict alone: a controller
// that fails with no fault is a finding before any point runs.
func RefOutcome(r *reports.Result, file string) Outcome {
	o := Outcome{Point: Point{ID: fmt.Sprintf("reference-seed-%d", r.Seed), Class: "reference", Signature: "no fault", About: "the scenario as written, without faults"},
		Result: file, Replay: r.Replay, Wall: r.Wall, Fired: true}
	if r.Error != "" {
		o.Error = text.FirstLine(r.Error)
		return o
	}
	o.Differences = verdictDifferences(r)
	return o
}

// classRank orders classes from the simplest fault to reason about.
var classRank = map[string]int{"reference": 0, Input: 1, Refused: 2, Intermediate: 3, Stale: 4, Unobserved: 5}

// Summarise groups outcomes into findings.
func (p *Plan) Summarise(controller string, refs []Outcome, outcomes []Outcome, wall time.Duration) *Exploration {
	e := &Exploration{Schema: ExplorationSchema, Scenario: p.Scenario.Name, Controller: controller, Backend: p.Backend, Seed: p.Seed,
		Coverage: Coverage{Found: p.Found, Steps: p.Steps, Points: len(p.Points), Inputs: len(p.Inputs)}, Outcomes: outcomes, ReferenceOutcomes: refs,
		Masks: p.Masks, Learned: p.Learned, Noise: p.Noise,
		Wall: reports.Duration(wall)}
	for _, r := range p.References {
		e.References = append(e.References, r.Seed)
	}
	byKey := map[string]*Finding{}
	var order []string
	add := func(o Outcome) {
		seen := map[string]bool{}
		for _, d := range o.Differences {
			k := d.key()
			if seen[k] {
				continue
			}
			seen[k] = true
			// The point shrunk from o, when it shows the same difference.
			smallest, detail := o, d.Detail
			if o.Shrunk != nil {
				if i := slices.IndexFunc(o.Shrunk.Differences, func(s Difference) bool { return s.key() == k }); i >= 0 {
					smallest, detail = *o.Shrunk, o.Shrunk.Differences[i].Detail
				}
			}
			f := byKey[k]
			if f == nil {
				f = &Finding{Oracle: d.Oracle, Kind: d.Kind, Field: d.Field, Detail: detail, Smallest: smallest}
				byKey[k] = f
				order = append(order, k)
			} else if simplerPoint(smallest.Point, f.Smallest.Point) {
				f.Smallest, f.Detail = smallest, detail
			}
			f.Points = append(f.Points, o.Point.ID)
		}
	}
	for _, o := range refs {
		add(o)
	}
	for _, o := range outcomes {
		e.Coverage.Run++
		switch {
		case o.Error != "":
			e.Coverage.Errors++
		case !o.Fired:
			e.Coverage.Unfired++
		}
		add(o)
	}
	for _, k := range order {
		e.Findings = append(e.Findings, *byKey[k])
	}
	sort.SliceStable(e.Findings, func(i, j int) bool { return len(e.Findings[i].Points) > len(e.Findings[j].Points) })
	return e
}

func simplerPoint(a, b Point) bool {
	if classRank[a.Class] != classRank[b.Class] {
		return classRank[a.Class] < classRank[b.Class]
	}
	if a.Size != b.Size {
		return a.Size < b.Size
	}
	return a.At < b.At
}

// Write saves e as JSON.
func (e *Exploration) Write(path string) error {
	b, err := json.MarshalIndent(e, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadExploration loads what Write saved.
func ReadExploration(path string) (*Exploration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var e Exploration
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%s: not an exploration: %w", path, err)
	}
	if e.Schema != ExplorationSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, e.Schema, ExplorationSchema)
	}
	return &e, nil
}

// Text is a plain summary: coverage, then one line per finding.
func (e *Exploration) Text() string {
	var b strings.Builder
	c := e.Coverage
	found := 0
	for _, n := range c.Found {
		found += n
	}
	if c.Inputs > 0 {
		fmt.Fprintf(&b, "explored the inputs of %s (%s, seed %d): %d changes drawn from the schemas", e.Scenario, e.Controller, e.Seed, c.Inputs)
	} else {
		fmt.Fprintf(&b, "explored %s (%s, seed %d): %d points found", e.Scenario, e.Controller, e.Seed, found)
	}
	var pruned []string
	for _, s := range c.Steps {
		if s.Before != s.After {
			pruned = append(pruned, fmt.Sprintf("%d %s", s.Before-s.After, s.Name))
		}
	}
	if len(pruned) > 0 && c.Inputs == 0 {
		fmt.Fprintf(&b, ", of which pruned %s", strings.Join(pruned, ", "))
	}
	fmt.Fprintf(&b, "; %d run (%d did not fire, %d errors) in %v\n", c.Run, c.Unfired, c.Errors, time.Duration(e.Wall).Round(time.Millisecond))
	if n := e.Noise; !n.Empty() {
		fmt.Fprintf(&b, "%d references disagreed on %d fields, %d objects, %d name families and %d counts: not judged\n",
			len(e.References), len(n.Fields), len(n.Exists), len(n.Families), len(n.Counts))
	}
	if c.Run == 0 && c.Points > 0 {
		b.WriteString("no point ran: the scenario fails without any fault (see the reference runs)\n")
	}
	if len(e.Findings) == 0 {
		b.WriteString("no findings: every run ended as the references did\n")
	}
	for i, f := range e.Findings {
		fmt.Fprintf(&b, "finding %d: %s, %d points; smallest %s (%s: %s)\n  %s\n", i+1, f.Name(), len(f.Points), f.Smallest.Point.ID,
			f.Smallest.Point.Class, f.Smallest.Point.Signature, f.Detail)
		if f.Smallest.Replay != "" {
			fmt.Fprintf(&b, "  replay: %s\n", f.Smallest.Replay)
		}
	}
	return b.String()
}
