package reports_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

func sample(name string, pass bool) *reports.Result {
	r := &reports.Result{Schema: reports.SchemaVersion, Scenario: name, Backend: "fake", Seed: 3, Pass: pass,
		Wall: reports.Duration(1500 * time.Millisecond), Replay: "go test ./scenarios -run x",
		History: reports.History{Faults: []chaos.Firing{{Fault: "conflict", Request: "patch deployments a/web-0", Outcome: "answered 409"}}}}
	if !pass {
		r.Reasons = []string{"invariant never-scales-down broken at 3s: <b>web-0</b> went from 4 to 2", "budget: 9 writes"}
	}
	return r
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := sample("baseline", false)
	path, err := reports.Write(dir, in)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "baseline_fake_3.json"), path)
	out, err := reports.Read(path)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"wall":"1.5s"`, "durations are written as Go durations")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.json"), []byte(`{"schema":"converge.dev/result/v9"}`), 0o644))
	all, err := reports.ReadDir(dir)
	assert.ErrorContains(t, err, `schema "converge.dev/result/v9", this converge reads "converge.dev/result/v3" (and upgrades "converge.dev/result/v2" and "converge.dev/result/v1")`)
	assert.Len(t, all, 1, "the readable results are still returned")
}

// A summary is the result without its history, read without decoding
// it; a result of an older schema is upgraded first, as Read does.
func TestReadSummary(t *testing.T) {
	dir := t.TempDir()
	in := sample("baseline", false)
	in.History.Events = []reports.WatchEvent{{Type: "ADDED", Resource: "deployments", Name: "web-0",
		Object: map[string]any{"spec": map[string]any{"replicas": float64(2)}}}}
	path, err := reports.Write(dir, in)
	require.NoError(t, err)
	got, err := reports.ReadSummary(path)
	require.NoError(t, err)
	want := *in
	want.History = reports.History{}
	assert.Equal(t, &want, got)

	v2 := filepath.Join(dir, "v2.json")
	require.NoError(t, os.WriteFile(v2, []byte(`{"schema": "converge.dev/result/v2", "scenario": "baseline", "backend": "fake", "seed": 1,
		"converged": false, "error": "the world could not start", "history": {"states": [{"at": "2026-01-01T00:00:00Z", "deployment": "web-0", "desired": 2}]}}`), 0o644))
	old, err := reports.ReadSummary(v2)
	require.NoError(t, err)
	assert.Equal(t, reports.SchemaVersion, old.Schema)
	assert.Equal(t, []reports.Finding{{Check: reports.CheckHarness, Kind: reports.KindHarness, Detail: "the world could not start"}}, old.Findings)
	assert.Empty(t, old.History.States)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"schema": "converge.dev/result/v3", "history": [`), 0o644))
	_, err = reports.ReadSummary(filepath.Join(dir, "bad.json"))
	assert.ErrorContains(t, err, "bad.json")
}

// A file of summaries holds the results without their histories, each
// as ReadSummary reads it from its own file; one of another schema, or
// no such file, is an error, and the report reads the runs' files.
func TestSummaries(t *testing.T) {
	dir := t.TempDir()
	a, b := sample("baseline", false), sample("webapp", true)
	a.History.Events = []reports.WatchEvent{{Type: "ADDED", Resource: "deployments", Name: "web-0",
		Object: map[string]any{"spec": map[string]any{"replicas": float64(2)}}}}
	path := filepath.Join(dir, "summaries-0.json")
	require.NoError(t, reports.WriteSummaries(path, []*reports.Result{a, b}))
	assert.NotEmpty(t, a.History.Events, "the results themselves are left whole")
	got, err := reports.ReadSummaries(path)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, r := range []*reports.Result{a, b} {
		file, err := reports.Write(dir, r)
		require.NoError(t, err)
		want, err := reports.ReadSummary(file)
		require.NoError(t, err)
		assert.Equal(t, want, got[i])
	}

	require.NoError(t, os.WriteFile(path, []byte(`[{"schema":"converge.dev/result/v9","scenario":"x"}]`), 0o644))
	_, err = reports.ReadSummaries(path)
	assert.ErrorContains(t, err, `a summary that is not of schema "converge.dev/result/v3"`)
	_, err = reports.ReadSummaries(filepath.Join(dir, "none.json"))
	assert.Error(t, err)
}

// A v2 result is read as v3: its violations, its missed goal and its error
// become findings, and its reasons stay as written.
func TestReadsV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema": "converge.dev/result/v2", "scenario": "baseline", "backend": "fake", "seed": 1,
		"started": "2000-01-01T00:00:00Z", "deadline": "1m30s", "converged": false,
		"reasons": ["did not converge within 1m30s: web: 1 of 3 ready", "invariant writes-allowed broken at 2s: the controller's delete of pods/web-x: no write rule selects it"],
		"violations": [{"invariant": "writes-allowed", "at": "2000-01-01T00:00:02Z", "object": "web-x", "request": "delete pods/web-x -> 200",
			"detail": "the controller's delete of pods/web-x: no write rule selects it"}]}`), 0o644))
	r, err := reports.Read(path)
	require.NoError(t, err)
	assert.Equal(t, reports.SchemaVersion, r.Schema)
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, []reports.Finding{
		{Check: "writes-allowed", Kind: reports.KindWriteRule, At: start.Add(2 * time.Second), Subject: reports.Subject{Name: "web-x"},
			RequestText: "delete pods/web-x -> 200", Detail: "the controller's delete of pods/web-x: no write rule selects it"},
		{Check: reports.CheckGoal, Kind: reports.KindGoal, Within: reports.Duration(90 * time.Second)},
	}, r.Findings)
	assert.Len(t, r.Reasons, 2, "the reasons are kept as written")
	assert.Equal(t, r.Violations[0], r.Findings[0].Violation())
}

// A v1 result (the scaler's, writes keyed by Deployment) is read as v3.
func TestReadsV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema": "converge.dev/result/v1", "scenario": "baseline", "backend": "fake", "seed": 1,
		"plan": [{"fault": "latency", "delay": 2000000000, "when": {"after": 1500000000, "every": 60000000000}}, {"fault": "conflict", "when": {"nth": 1}}],
		"counters": {"writes": {"web-0": 2, "deployments/web-1": 1}, "needed": {"web-0": 1}},
		"history": {"states": [{"at": "2026-01-01T00:00:00Z", "deployment": "web-0", "desired": 2}]}}`), 0o644))
	r, err := reports.Read(path)
	require.NoError(t, err)
	assert.Equal(t, reports.SchemaVersion, r.Schema)
	assert.Equal(t, map[string]int{"deployments/web-0": 2, "deployments/web-1": 1}, r.Counters.Writes)
	assert.Equal(t, map[string]int{"deployments/web-0": 1}, r.Counters.Needed)
	assert.Len(t, r.History.States, 1)
	// v1 wrote a fault's durations in nanoseconds.
	assert.Equal(t, []chaos.Spec{
		{Fault: "latency", Delay: 2 * time.Second, When: chaos.When{After: 1500 * time.Millisecond, Every: time.Minute}},
		{Fault: "conflict", When: chaos.When{Nth: 1}},
	}, r.Plan)
}

// A duration is written one way, "1m30s", in a result as in a scenario:
// a newer result with a number where a duration goes is refused.
func TestDurationsAreStrings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"schema": "`+reports.SchemaVersion+`", "scenario": "baseline", "backend": "fake", "seed": 1,
		"plan": [{"fault": "latency", "delay": 2000000000}]}`), 0o644))
	_, err := reports.Read(path)
	assert.ErrorContains(t, err, `a duration is a string like "1m30s"`)
}

func TestJUnit(t *testing.T) {
	errored := sample("partition", false)
	errored.Error = "starting the envtest backend: no assets"
	// A profile none of whose faults matched a request is skipped; one
	// with a fault that did is not.
	skipped := sample("baseline-conflicts", true)
	skipped.Plan = []chaos.Spec{{Fault: "conflict", Profile: "conflicts"}}
	skipped.Inapplicable = []string{"fault 0 (conflict)"}
	applied := sample("baseline-server-errors", true)
	applied.Plan = []chaos.Spec{{Fault: "server-error", Profile: "server-errors"}, {Fault: "throttle", Profile: "server-errors"}}
	applied.Inapplicable = []string{"fault 1 (throttle)"}
	assert.Empty(t, applied.Skipped())
	var buf bytes.Buffer
	require.NoError(t, reports.WriteJUnit(&buf, []*reports.Result{sample("baseline", true), sample("tombstone", false), errored, skipped, applied}))
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Body    string `xml:",chardata"`
				} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc), buf.String())
	assert.Equal(t, 5, doc.Tests)
	assert.Equal(t, 1, doc.Failures)
	assert.Equal(t, 1, doc.Errors)
	assert.Equal(t, 1, doc.Skipped)
	require.NotNil(t, doc.Suites[0].Cases[3].Skipped)
	assert.Equal(t, "the conflicts profile does not apply: none of its faults matched a request of the controller (fault 0 (conflict))",
		doc.Suites[0].Cases[3].Skipped.Message)
	assert.Nil(t, doc.Suites[0].Cases[4].Skipped)
	require.Len(t, doc.Suites, 1)
	assert.Equal(t, "converge/fake", doc.Suites[0].Name)
	c := doc.Suites[0].Cases[1]
	assert.Equal(t, "tombstone/fake/seed-3", c.Name)
	require.NotNil(t, c.Failure)
	assert.Contains(t, c.Failure.Message, "<b>web-0</b>", "escaped in the XML, intact once read")
	assert.Contains(t, c.Failure.Body, "replay: go test ./scenarios -run x")
}

func TestPodLag(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	st := func(s float64, d string, desired, pods int32) reports.State {
		return reports.State{At: at(s), Deployment: d, Desired: desired, Pods: pods}
	}
	for _, tc := range []struct {
		name   string
		states []reports.State
		want   time.Duration
	}{
		{"none", nil, 0},
		{"created, then its pods", []reports.State{st(0, "a", 2, 0), st(1.5, "a", 2, 1), st(2, "a", 2, 2)}, 2 * time.Second},
		{"the longest of two Deployments", []reports.State{
			st(0, "a", 2, 2), st(0, "b", 2, 2), st(10, "a", 4, 2), st(11, "b", 4, 2), st(12, "a", 4, 4), st(26, "b", 4, 4),
		}, 15 * time.Second},
		{"a rise before the last is met extends the wait", []reports.State{
			st(0, "a", 2, 2), st(10, "a", 4, 2), st(15, "a", 8, 3), st(19, "a", 8, 8),
		}, 9 * time.Second},
		{"a fall to what exists ends it", []reports.State{st(0, "a", 2, 2), st(1, "a", 4, 2), st(3, "a", 2, 2)}, 2 * time.Second},
		{"never met: up to the last state", []reports.State{st(0, "a", 2, 2), st(5, "a", 4, 2), st(7, "b", 1, 1)}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, reports.PodLag(tc.states))
		})
	}
}

// Pages rendered side by side are the pages rendered one by one.
// A report whose pages were written by the processes that ran its runs:
// the index from their summaries is the index WriteHTML writes from the
// whole results.
func TestWriteIndexFromSummaries(t *testing.T) {
	whole, parts := t.TempDir(), t.TempDir()
	var results, summaries []*reports.Result
	for i := range 4 {
		r := sample(fmt.Sprintf("scenario-%d", i), i%2 == 0)
		path, err := reports.Write(parts, r)
		require.NoError(t, err)
		require.NoError(t, reports.WritePage(parts, r))
		s, err := reports.ReadSummary(path)
		require.NoError(t, err)
		results, summaries = append(results, r), append(summaries, s)
	}
	_, err := reports.WriteHTML(whole, results, "<p>extra</p>")
	require.NoError(t, err)
	index, err := reports.WriteIndex(parts, summaries, "<p>extra</p>")
	require.NoError(t, err)
	for _, name := range []string{"index.html", reports.RunPageName(results[0]), reports.RunPageName(results[3])} {
		want, err := os.ReadFile(filepath.Join(whole, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(parts, name))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), name)
	}
	assert.Equal(t, filepath.Join(parts, "index.html"), index)
}

func TestWriteHTMLWritesEveryRunPage(t *testing.T) {
	dir := t.TempDir()
	var results []*reports.Result
	for i := range 9 {
		r := sample(fmt.Sprintf("scenario-%d", i), i%3 != 0)
		r.Seed = uint64(i)
		results = append(results, r)
	}
	index, err := reports.WriteHTML(dir, results, "")
	require.NoError(t, err)
	assert.FileExists(t, index)
	for _, r := range results {
		got, err := os.ReadFile(filepath.Join(dir, reports.RunPageName(r)))
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, reports.RenderRun(&want, r, "../index.html"))
		assert.Equal(t, want.String(), string(got), reports.RunPageName(r))
	}
}
