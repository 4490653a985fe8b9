package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
)

const hostile = `<img src=x onerror=alert(1)>`

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// failingResult is a run where a 409 storm precedes a scale-down of web-1.
func failingResult() *Result {
	conflict := chaos.Spec{Fault: "conflict", Target: chaos.Target{Resource: "deployments"}, When: chaos.When{Probability: 0.5, Until: 20 * time.Second}}
	crash := chaos.Spec{Fault: "crash", Target: chaos.Target{Verbs: []string{"patch"}, Resource: "deployments"}, When: chaos.When{Nth: 1}}
	conflictTarget := chaos.Target{Verbs: []string{"update", "patch"}, Resource: "deployments"}
	return &Result{
		Schema: SchemaVersion, Scenario: "storm", Backend: "fake", Seed: 3, Controller: "scaler",
		Started: t0, Simulated: Duration(40 * time.Second), Wall: Duration(200 * time.Millisecond),
		Settle: Duration(10 * time.Second), Deadline: Duration(time.Minute),
		Plan:       []chaos.Spec{conflict, crash},
		Invariants: []string{"replicas-within-max", "never-scales-down", "no-panic"},
		Reasons:    []string{"invariant never-scales-down broken at 12s: 4 -> 3"},
		Violations: []Violation{{Invariant: "never-scales-down", At: at(12 * time.Second), Object: "deployments/web-1", Request: "patch deployments/web-1 -> 200", Detail: "4 -> 3"}},
		Counters:   Counters{Writes: map[string]int{"deployments/web-0": 1, "deployments/web-1": 3}, Needed: map[string]int{"deployments/web-0": 1, "deployments/web-1": 1}, Faults: 3, Reconciles: 20},
		History: History{
			Requests: []Request{
				{At: at(time.Second), Verb: "patch", Resource: "deployments", Name: "web-1", Code: 409},
				{At: at(11 * time.Second), Verb: "patch", Resource: "deployments", Name: "web-1", Code: 200},
				{At: at(12 * time.Second), Verb: "patch", Resource: "deployments", Name: "web-1", Code: 200},
			},
			Faults: []chaos.Firing{
				{At: at(time.Second), Fault: "conflict", Target: conflictTarget, Request: "patch deployments converge/web-1", Match: 1, Outcome: "answered 409"},
				{At: at(11 * time.Second), Fault: "crash", Target: crash.Target, Request: "patch deployments converge/web-1", Match: 2, Outcome: "instance crashed"},
				{At: at(13 * time.Second), Fault: "conflict", Target: conflictTarget, Request: "patch deployments converge/web-0", Match: 1, Outcome: "answered 409"},
				{At: at(30 * time.Second), Fault: "exit", Request: "scaler", Outcome: "signal: killed"},
			},
			States: []State{
				{At: at(0), Deployment: "web-0", Desired: 2, Max: 8},
				{At: at(0), Deployment: "web-1", Desired: 2, Max: 8},
				{At: at(11 * time.Second), Deployment: "web-1", Desired: 4, Pods: 4, Max: 8},
				{At: at(12 * time.Second), Deployment: "web-1", Desired: 3, Pods: 3, Max: 8},
			},
			Samples: []Sample{{At: at(time.Second), QueueDepth: 2, Reconciles: 1}, {At: at(2 * time.Second), QueueDepth: 0, Reconciles: 4, Retries: 1}},
			Log:     []Entry{{At: at(0), What: "instance 0 started"}},
		},
		Replay: "go test ./scenarios -run 'TestScenarios/^storm$'",
	}
}

func TestLanes(t *testing.T) {
	p := buildRunPage(failingResult())
	require.Len(t, p.Faults, 3, "one lane per planned fault, and one for the exit that no plan declared")
	assert.Equal(t, "conflict on deployments (p=0.5)", p.Faults[0].Name)
	assert.Equal(t, []span{{0, 20}}, p.Faults[0].Windows, "the declared window: from the start until 20s")
	assert.Equal(t, []float64{1, 13}, p.Faults[0].Firings, "the conflict's firings, matched by its built target")
	assert.Equal(t, "crash on patch deployments (match 1)", p.Faults[1].Name)
	assert.Empty(t, p.Faults[1].Windows, "a fault bound to the k-th match has firings, no window")
	assert.Equal(t, []float64{11}, p.Faults[1].Firings)
	assert.Equal(t, "exit", p.Faults[2].Name)
}

func TestBreakNamesThePrecedingFault(t *testing.T) {
	p := buildRunPage(failingResult())
	require.Len(t, p.Breaks, 1)
	b := p.Breaks[0]
	require.NotNil(t, b.Preceded)
	assert.Equal(t, "crash", b.Preceded.Fault, "the last fault at or before the violation, not the first or a later one")
	assert.Equal(t, time.Second, b.Before)
	assert.InDelta(t, 12, b.T, 1e-9)
	assert.Contains(t, strings.Join(p.Verdict, "\n"), "The fault before it: crash (patch deployments converge/web-1), 1s earlier.")

	// Broken invariants come first; the others held.
	require.Len(t, p.Invariants, 3)
	assert.Equal(t, "never-scales-down", p.Invariants[0].Name)
	assert.False(t, p.Invariants[0].Held)
	assert.True(t, p.Invariants[1].Held)
	assert.Contains(t, strings.Join(p.Verdict, "\n"), "2 of 3 invariants held")
}

func TestNoFaultBeforeTheBreak(t *testing.T) {
	r := failingResult()
	r.Violations[0].At = at(500 * time.Millisecond)
	p := buildRunPage(r)
	assert.Nil(t, p.Breaks[0].Preceded)
	assert.Contains(t, strings.Join(p.Verdict, "\n"), "No fault had fired yet.")
}

func TestEventsInTimeOrder(t *testing.T) {
	r := failingResult()
	p := buildRunPage(r)
	h := r.History
	assert.Len(t, p.Events, len(h.Requests)+len(h.Faults)+len(h.Samples)+len(h.Log)+len(r.Violations))
	for i := 1; i < len(p.Events); i++ {
		require.LessOrEqual(t, p.Events[i-1].T, p.Events[i].T, "row %d", i)
	}
	var conflict, violation bool
	for _, e := range p.Events {
		conflict = conflict || (e.Kind == "request" && e.Class == "409")
		violation = violation || (e.Kind == "violation" && strings.Contains(e.Text, "never-scales-down"))
	}
	assert.True(t, conflict, "a 409 is classed as a conflict")
	assert.True(t, violation)
}

func TestIndexFailuresFirst(t *testing.T) {
	pass := failingResult()
	pass.Scenario, pass.Pass, pass.Reasons, pass.Violations = "a-first-by-name", true, nil, nil
	broken := failingResult()
	broken.Scenario, broken.Error = "zz-error", "backend did not start"
	rows := buildIndex([]*Result{pass, failingResult(), broken}, func(r *Result) string { return r.Scenario })
	var order []string
	for _, r := range rows {
		order = append(order, r.Status+" "+r.R.Scenario)
	}
	assert.Equal(t, []string{"error zz-error", "fail storm", "pass a-first-by-name"}, order)
	assert.Equal(t, 4, rows[1].Writes)
	assert.Equal(t, "invariant never-scales-down broken at 12s: 4 -> 3", rows[1].Reason)
}

func TestChartedPicksViolationsFirst(t *testing.T) {
	r := failingResult()
	for i := range 20 {
		r.History.States = append(r.History.States, State{At: at(0), Deployment: fmt.Sprintf("other-%02d", i), Desired: 1, Max: 4})
		r.Counters.Writes[fmt.Sprintf("deployments/other-%02d", i)] = 10
	}
	got := charted(r)
	require.Len(t, got, maxCharted)
	assert.Equal(t, "web-1", got[0], "the Deployment a violation names comes first")
	assert.Equal(t, "other-00", got[1], "then the most written")
}

func TestBucketWidth(t *testing.T) {
	for end, want := range map[float64]float64{10: 0.1, 30: 0.25, 240: 2, 3600: 30, 86400: 1200} {
		assert.Equal(t, want, bucketWidth(end), "run of %gs", end)
	}
}

// Every value from the cluster or the scenario is text on the page: a
// Deployment, a request, a reason or a scenario named like markup.
func TestHostileValuesAreEscaped(t *testing.T) {
	r := failingResult()
	r.Scenario = hostile
	r.Description = hostile
	r.Reasons = append(r.Reasons, hostile)
	r.Violations[0].Object = "deployments/" + hostile
	r.Violations[0].Detail = hostile
	r.History.States = append(r.History.States, State{At: at(time.Second), Deployment: hostile, Desired: 1, Max: 2})
	r.History.Requests = append(r.History.Requests, Request{At: at(2 * time.Second), Verb: "patch", Resource: "deployments", Name: hostile, Code: 200})
	r.History.Events = append(r.History.Events, WatchEvent{At: at(2 * time.Second), Type: "ADDED", Resource: "deployments", Name: hostile})
	r.History.Faults[0].Request = hostile
	r.Plan[0].Target.Name = hostile
	r.Versions = map[string]string{hostile: hostile}
	r.Replay = hostile
	r.Notes = []string{hostile}

	var run, index bytes.Buffer
	require.NoError(t, RenderRun(&run, r, "index.html"))
	require.NoError(t, RenderIndex(&index, []*Result{r}, func(*Result) string { return "runs/x.html" }, ""))
	for name, page := range map[string]string{"run": run.String(), "index": index.String()} {
		assert.NotContains(t, page, "<img", name)
		assert.NotContains(t, page, "onerror=alert(1)>", name)
		assert.Contains(t, page, "&lt;img src=x onerror=alert(1)&gt;", name)
	}
	assert.Contains(t, run.String(), "<svg", "the charts are there")
}

func TestRunPageShowsPodLagAndNotes(t *testing.T) {
	r := failingResult()
	r.Counters.PodLag = Duration(15300 * time.Millisecond)
	r.Notes = []string{"a Deployment waited 15.3s for the pods it asked for"}
	var run bytes.Buffer
	require.NoError(t, RenderRun(&run, r, "index.html"))
	assert.Contains(t, run.String(), "pods came up to 15.3s after they were asked for")
	assert.Contains(t, run.String(), "Note: a Deployment waited 15.3s for the pods it asked for.")

	r.Counters.PodLag, r.Notes = 0, nil
	run.Reset()
	require.NoError(t, RenderRun(&run, r, "index.html"))
	assert.NotContains(t, run.String(), "pods came up")
	assert.NotContains(t, run.String(), "Note:")
}

// Any controller's objects are charted from the series of the fields its
// scenario names: a row per object, the one a violation names first.
func TestSeriesAreChartedPerObject(t *testing.T) {
	r := failingResult()
	r.History.States, r.Counters.Needed = nil, nil
	for i := range 12 {
		name := fmt.Sprintf("shop-%02d", i)
		r.History.Series = append(r.History.Series,
			Series{Kind: "examples.converge.dev/v1alpha1 WebApp", Name: name, Field: "status.readyReplicas", Points: []Point{{At: at(0), Value: 0}, {At: at(3 * time.Second), Value: 2}}},
			Series{Kind: "examples.converge.dev/v1alpha1 WebApp", Name: name, Field: "status.conditions[Available]", Points: []Point{{At: at(3 * time.Second), Value: 1}}})
	}
	r.Violations = append(r.Violations, Violation{Invariant: "x", At: at(time.Second), Object: "shop-07", Detail: "x"})
	got := chartedObjects(r)
	require.Len(t, got, maxCharted)
	assert.Equal(t, "WebApp/shop-07", got[0], "the object a violation names comes first")
	assert.Equal(t, "WebApp/shop-00", got[1], "then the first seen")

	p := buildRunPage(r)
	c, err := overview(r, p)
	require.NoError(t, err)
	assert.Contains(t, c.Rows, "WebApp/shop-07")
	assert.Contains(t, string(c.SVG), "WebApp/shop-07: status.readyReplicas, status.conditions[Available]")
	assert.Equal(t, maxCharted, p.Shown)
	assert.Equal(t, 12, p.Total)
}

// A run whose fault profile does not apply says so, on its page and in
// the index, rather than passing.
func TestRunPageShowsASkip(t *testing.T) {
	r := failingResult()
	r.Pass, r.Reasons, r.Findings, r.Violations = true, nil, nil, nil
	r.Plan = []chaos.Spec{{Fault: "conflict", Profile: "conflicts"}}
	r.Inapplicable = []string{"fault 0 (conflict)"}
	var run bytes.Buffer
	require.NoError(t, RenderRun(&run, r, "index.html"))
	assert.Contains(t, run.String(), `<span class="badge skipped">SKIPPED</span>`)
	assert.Contains(t, run.String(), "Skipped: the conflicts profile does not apply: none of its faults matched a request of the controller (fault 0 (conflict)).")
	assert.Equal(t, "skipped", status(r))
}

// A run of a controller with no probe says so in its controller row,
// rather than blaming a process boundary it may not have.
func TestTheControllerRowSaysWhenThereIsNoProbe(t *testing.T) {
	r := &Result{}
	assert.Equal(t, "controller: no probe (its Runner is no scenarios.Prober, or it runs out of process): nothing sampled", controllerRow(r, 1, 10).Title.Text)
	r.History.Samples = []Sample{{QueueDepth: 2}}
	assert.Equal(t, "controller: queue depth; reconciles and retries per 1s", controllerRow(r, 1, 10).Title.Text)
}
