package zoo

import (
	"bytes"
	"fmt"
	"html/template"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim/backends"
)

// Cell is what the runs of one mutant on one scenario found.
type Cell struct {
	Mutant, Scenario, Backend string
	Runs, Caught              int
	// Why is the first run's verdict: the broken invariant, "goal" or the
	// budget, and its first reason.
	Why, Reason string
	// Virtual is the time to detect on the run's clock (the first
	// violation, or the end of a run that missed its goal or budget); Wall
	// how long that run took.
	Virtual, Wall time.Duration
	Seed          uint64
}

// Table is the detection table: mutants by scenarios.
type Table struct {
	Mutants   []Mutant
	Scenarios []string // "name/backend"
	Cells     map[string]*Cell
	// FalseAlarms of the correct scaler on the scenarios that caught a
	// mutant, over FalseAlarmRuns runs.
	FalseAlarms, FalseAlarmRuns, FalseAlarmSeeds int
}

func cellKey(mutant, scenario string) string { return mutant + "\x00" + scenario }

// NewTable starts an empty table.
func NewTable(mutants []Mutant) *Table { return &Table{Mutants: mutants, Cells: map[string]*Cell{}} }

// Add records the result of mutant on a scenario.
func (t *Table) Add(mutant string, r *reports.Result) {
	scenario := r.Scenario + "/" + r.Backend
	if !slices.Contains(t.Scenarios, scenario) {
		t.Scenarios = append(t.Scenarios, scenario)
		sort.Strings(t.Scenarios)
	}
	c := t.Cells[cellKey(mutant, scenario)]
	if c == nil {
		c = &Cell{Mutant: mutant, Scenario: r.Scenario, Backend: r.Backend}
		t.Cells[cellKey(mutant, scenario)] = c
	}
	c.Runs++
	if r.Pass {
		return
	}
	c.Caught++
	if c.Caught > 1 {
		return
	}
	c.Seed, c.Wall = r.Seed, time.Duration(r.Wall)
	c.Virtual = time.Duration(r.Simulated)
	// What caught it: the earliest broken invariant, else the goal, else
	// a budget.
	end := r.Started.Add(time.Duration(r.Simulated))
	at := func(f reports.Finding) time.Time { // a finding of the run's end has no instant
		if f.At.IsZero() {
			return end
		}
		return f.At
	}
	first := func(keep func(reports.Finding) bool) (reports.Finding, bool) {
		var out reports.Finding
		found := false
		for _, f := range r.Findings {
			if keep(f) && (!found || at(f).Before(at(out))) {
				out, found = f, true
			}
		}
		return out, found
	}
	invariant := func(f reports.Finding) bool {
		switch f.Kind {
		case reports.KindGoal, reports.KindBudget, reports.KindHarness, reports.KindUnfired:
			return false
		}
		return true
	}
	if r.Error != "" {
		c.Why, c.Reason = "error", text.FirstLine(r.Error)
	} else if f, ok := first(invariant); ok {
		c.Why, c.Reason, c.Virtual = f.Check, text.FirstLine(f.Detail), at(f).Sub(r.Started)
	} else if f, ok := first(func(f reports.Finding) bool { return f.Kind == reports.KindGoal }); ok {
		c.Why, c.Reason = "goal", text.FirstLine(f.Sentence(r.Started))
	} else if f, ok := first(func(f reports.Finding) bool { return f.Kind == reports.KindBudget }); ok {
		c.Why, c.Reason = "budget", strings.TrimPrefix(f.Sentence(r.Started), "budget: ")
	} else {
		c.Why, c.Reason = "goal", "" // not converged, with nothing said why
	}
}

// Cell returns the cell of mutant on scenario ("name/backend").
func (t *Table) Cell(mutant, scenario string) *Cell { return t.Cells[cellKey(mutant, scenario)] }

// CaughtBy lists the scenarios that caught mutant.
func (t *Table) CaughtBy(mutant string) []string {
	var out []string
	for _, s := range t.Scenarios {
		if c := t.Cell(mutant, s); c != nil && c.Caught > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Catching lists the fake scenarios that caught any mutant other than the
// control.
func (t *Table) Catching() []string {
	var out []string
	for _, s := range t.Scenarios {
		if !strings.HasSuffix(s, "/fake") {
			continue
		}
		for _, m := range t.Mutants {
			if c := t.Cell(m.Name, s); m.Name != Control().Name && c != nil && c.Caught > 0 {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// Markdown is the table for a README: one row per mutant, with the
// scenarios that caught it, the first's verdict and its time to detect.
func (t *Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| mutant | bug | caught by | first catch: verdict | time to detect (virtual / wall) |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range t.Mutants {
		by := t.CaughtBy(m.Name)
		var names []string
		for _, s := range by {
			c := t.Cell(m.Name, s)
			names = append(names, fmt.Sprintf("%s (%d/%d)", s, c.Caught, c.Runs))
		}
		verdict, ttd := "not caught", ""
		if first := t.Fastest(m.Name); first != nil {
			verdict = fmt.Sprintf("%s: %s", first.Why, escapePipes(shorten(first.Reason, 90)))
			ttd = fmt.Sprintf("%v / %v", first.Virtual.Round(time.Millisecond), first.Wall.Round(time.Millisecond))
		}
		caught := strings.Join(names, ", ")
		if caught == "" {
			caught = "none"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.Name, m.Bug, caught, verdict, ttd)
	}
	if t.FalseAlarmRuns > 0 {
		fmt.Fprintf(&b, "\nFalse alarms of the correct scaler on the %d scenarios that caught a mutant, seeds 1-%d: %d in %d runs.\n",
			len(t.Catching()), t.FalseAlarmSeeds, t.FalseAlarms, t.FalseAlarmRuns)
	}
	return b.String()
}

// Fastest is the cell that caught mutant soonest on the run's clock.
func (t *Table) Fastest(mutant string) *Cell {
	var best *Cell
	for _, s := range t.CaughtBy(mutant) {
		c := t.Cell(mutant, s)
		if best == nil || (c.Backend == best.Backend && c.Virtual < best.Virtual) || (backends.Virtual(c.Backend) && !backends.Virtual(best.Backend)) {
			best = c
		}
	}
	return best
}

func escapePipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

var tableHTML = template.Must(template.New("zoo").Funcs(template.FuncMap{
	"cell":  func(t *Table, m, s string) *Cell { return t.Cell(m, s) },
	"short": func(d time.Duration) string { return d.Round(time.Millisecond).String() },
}).Parse(`<section class="zoo">
  <h2>Bug zoo: mutants by scenarios</h2>
  <p class="muted">Each mutant is a hand-written controller with one classic bug; a cell says whether the scenario caught it (runs that failed / runs), with the first verdict and its time to detect (virtual / wall). The control is the same controller without a bug.{{if .FalseAlarmRuns}} False alarms of the correct scaler on the scenarios that caught a mutant, seeds 1-{{.FalseAlarmSeeds}}: <b>{{.FalseAlarms}}</b> in {{.FalseAlarmRuns}} runs.{{end}}</p>
  <div style="overflow-x: auto">
  <table class="zoo-table">
    <thead><tr><th>mutant</th>{{range .Scenarios}}<th class="num">{{.}}</th>{{end}}</tr></thead>
    <tbody>
    {{$t := .}}{{range .Mutants}}{{$m := .}}
    <tr><td><code>{{.Name}}</code><br><span class="muted">{{.Bug}}</span></td>
    {{range $t.Scenarios}}{{with cell $t $m.Name .}}{{if .Caught}}<td class="caught" title="{{.Why}}: {{.Reason}}"><b class="broken">caught</b> {{.Caught}}/{{.Runs}}<br><span class="muted">{{.Why}}, {{short .Virtual}} / {{short .Wall}}</span></td>{{else}}<td class="muted">{{.Runs}} passed</td>{{end}}{{else}}<td></td>{{end}}{{end}}
    </tr>{{end}}
    </tbody>
  </table>
  </div>
</section>`))

// HTML is the table as a section of the report's index.
func (t *Table) HTML() (template.HTML, error) {
	var b bytes.Buffer
	if err := tableHTML.Execute(&b, t); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil // built by html/template
}
