package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// Exploring the scaler's baseline: every point runs in one of two
// processes, the correct scaler gives no finding, and the report holds
// the exploration and a page per run.
func TestExploreTheBaseline(t *testing.T) {
	report := t.TempDir()
	// An earlier exploration's claims in the folder take no point.
	require.NoError(t, os.MkdirAll(filepath.Join(report, "claims"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(report, "claims", "0"), nil, 0o644))
	out, err := run(t, "explore", "baseline", "--parallel", "2", "--report", report, "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	assert.Contains(t, out, "no findings")
	assert.Regexp(t, `points per second: [0-9.]+ in all \([0-9]+ in [0-9.]+s, the reference runs and the report included\), [0-9.]+ while the points ran \([0-9.]+s\)\n`, out)
	e, err := explore.ReadExploration(filepath.Join(report, "exploration.json"))
	require.NoError(t, err)
	assert.Empty(t, e.Findings)
	assert.Greater(t, e.Coverage.Run, 50)
	assert.Equal(t, e.Coverage.Points, e.Coverage.Run)
	assert.Equal(t, e.Coverage.Points, len(e.Outcomes), "an outcome per point")
	assert.Less(t, e.Coverage.Unfired, e.Coverage.Run/4, "most points meet their moment again")
	assert.FileExists(t, filepath.Join(report, "index.html"))
	assert.FileExists(t, filepath.Join(report, "runs", "baseline-p001_fake_1.html"))

	// The two processes shared the points: each ran once, in one of them
	// (which, goes to whichever asked first).
	ran := map[string]int{}
	for i := range 2 {
		var part []explore.Outcome
		require.NoError(t, readJSON(filepath.Join(report, fmt.Sprintf("outcomes-%d.json", i)), &part))
		for _, o := range part {
			ran[o.Point.ID]++
		}
	}
	assert.Len(t, ran, e.Coverage.Points)
	for id, n := range ran {
		assert.Equal(t, 1, n, "%s ran %d times", id, n)
	}
	// Each point's page was written by the process that ran it, and each
	// reference's by one of them, as the report would have rendered it
	// from the result; the report read none of those results.
	require.NotEmpty(t, e.ReferenceOutcomes)
	for _, o := range append(e.Outcomes[:5:5], e.ReferenceOutcomes...) {
		require.True(t, o.Page, o.Point.ID)
		r, err := reports.Read(filepath.Join(report, o.Result))
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, reports.RenderRun(&want, r, "../index.html"))
		got, err := os.ReadFile(filepath.Join(report, reports.RunPageName(r)))
		require.NoError(t, err)
		assert.Equal(t, want.String(), string(got), o.Point.ID)
	}
	assert.NoDirExists(t, filepath.Join(report, "claims"), "the claims are removed once the points ran")
	summarised := 0
	for i := range 2 {
		sums, err := reports.ReadSummaries(filepath.Join(report, fmt.Sprintf("summaries-%d.json", i)))
		require.NoError(t, err)
		summarised += len(sums)
	}
	assert.Equal(t, len(e.Outcomes)+len(e.ReferenceOutcomes), summarised, "a summary per page written")
	index, err := os.ReadFile(filepath.Join(report, "index.html"))
	require.NoError(t, err)
	assert.Equal(t, len(e.Outcomes)+len(e.ReferenceOutcomes), strings.Count(string(index), `<tr class="pass"`), "a row per run")
}

// The pace counts the points over the whole exploration and over the
// points' own time, and only the first where no point ran.
func TestPace(t *testing.T) {
	assert.Equal(t, "points per second: 10.0 in all (12 in 1.20s, the reference runs and the report included), 24.0 while the points ran (0.50s)",
		pace(12, 1200*time.Millisecond, 500*time.Millisecond))
	assert.Equal(t, "points per second: 0.0 in all (0 in 0.80s, the reference runs and the report included)",
		pace(0, 800*time.Millisecond, 0))
}

func TestExploreRefusesAScenarioWithFaults(t *testing.T) {
	out, err := run(t, "explore", "conflict-storm", "--report", t.TempDir(), "--test-binary", scenarioTests(t))
	require.Error(t, err, out)
	assert.Contains(t, out+err.Error(), "--without-faults")
	_, err = run(t, "explore", "baseline", "--parallel", "0", "--test-binary", scenarioTests(t))
	assert.Equal(t, 2, exitCode(err))
}

// A run that fails under five faults, of which one is to blame (a 409 on a
// patch adds the retry that breaks the budget of patches), shrinks to
// that one. The scaler starts a second late, once the world has written
// the Deployments' status: started with them, its patches race those
// writes and a loaded machine sees 409s with no fault at all.
func TestShrinkAFailingRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tight.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: tight
description: three Deployments, one patch each, and five faults, one of them a 409 on a patch
catches: nothing; a 409 breaks its budget
objects:
  - count: 3
    manifest:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web-{{index}}
        labels: {app: "web-{{index}}", converge.dev/scaler: enabled}
        annotations: {converge.dev/max-replicas: "16"}
      spec:
        replicas: 2
        selector: {matchLabels: {app: "web-{{index}}"}}
        template:
          metadata: {labels: {app: "web-{{index}}"}}
          spec: {containers: [{name: app, image: registry.invalid/app:1}]}
world: {readiness: {kind: ready-after-delay, delay: 2s}}
faults:
  - {fault: watch-duplicate, target: {resource: deployments}, when: {count: 2}}
  - {fault: server-error, code: 503, target: {verbs: [get]}, when: {count: 1}}
  - {fault: conflict, target: {verbs: [patch], resource: deployments, name: web-1}, when: {nth: 1}}
  - {fault: watch-duplicate, target: {resource: pods}, when: {count: 1}}
  - {fault: watch-close, target: {resource: deployments}, when: {count: 1, after: 10s}}
controller: {startAfter: 1s}
timing: {deadline: 2m, settle: 10s}
budgets: {requests: {patch: 3}}
`), 0o644))
	report := filepath.Join(dir, "report")
	out, err := run(t, "run", file, "--backend", "fake", "--report", report, "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	result := filepath.Join(report, "tight_fake_1.json")
	r, err := reports.Read(result)
	require.NoError(t, err)
	require.False(t, r.Pass)

	out, err = run(t, "shrink", result, "--test-binary", scenarioTests(t))
	if err != nil {
		// The tail in the error may not reach the failure: the whole
		// output, which goes with the test's temporary folder.
		log, _ := os.ReadFile(filepath.Join(report, "scenarios.log"))
		t.Fatalf("%v\n%s\nthe scenario tests' whole output:\n%s", err, out, log)
	}
	assert.Contains(t, out, "to 1 in")
	assert.Contains(t, out, `"fault":"conflict"`)
	assert.Contains(t, out, "counted as failing when 3 of its 3 seeded runs failed")
	shrunk := filepath.Join(report, "tight-shrunk.yaml")
	assert.Contains(t, out, "scenario: "+shrunk)
	assert.Contains(t, out, "replay: converge run "+shrunk+" --backend fake --seeds 1 --test-binary")
	out, err = run(t, "run", shrunk, "--backend", "fake", "--report", filepath.Join(dir, "again"), "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out, "the shrunk scenario fails")

	_, err = run(t, "shrink", filepath.Join(dir, "missing.json"))
	assert.Equal(t, 2, exitCode(err))
}

// Exploring the inputs of a user's scenario (the webapp example's, through
// its package's tests): every input point runs, one run each, and the
// correct operator gives no finding.
func TestExploreTheInputs(t *testing.T) {
	tier.Full(t, "it builds the webapp example's tests; zoo's TestExploreInputs explores the same inputs in presubmit")
	report := t.TempDir()
	out, err := run(t, "explore", "webapp", "--inputs", "--parallel", "2", "--report", report, "--package", "../../examples/webapp")
	require.NoError(t, err, out)
	assert.Contains(t, out, "input points (one change or a chain of two or three; one run each: the resource created with the changes, changed back, then changed again, read before each step (the three runs apart when the controller had not gone quiet by one); a failing one shrunk) in 2 processes")
	assert.Contains(t, out, "explored the inputs of webapp")
	assert.Contains(t, out, "no findings")
	e, err := explore.ReadExploration(filepath.Join(report, "exploration.json"))
	require.NoError(t, err)
	assert.Empty(t, e.Findings)
	assert.Positive(t, e.Coverage.Inputs)
	assert.Equal(t, e.Coverage.Inputs, e.Coverage.Run)
	for _, o := range e.Outcomes {
		assert.Equal(t, explore.Input, o.Point.Class)
		assert.Contains(t, o.Replay, "converge run ")
	}
}

// The points' processes start before the plan is written and wait for
// their shard: those given one run it, the others run nothing, and one
// that ended before its shard came does not hold the others up.
func TestShardProcessesWaitForTheirShard(t *testing.T) {
	dir := t.TempDir()
	script := `if read -r shard; then echo "$shard" > "shard-$(echo "$shard" | tr / -)"; else mktemp -p . none-XXXXXX; fi`
	sh := &tests{bin: "/bin/sh", dir: dir}
	p := startShards(t.Context(), "test", sh, []string{"-c", script}, invocation.Invocation{}, 3, dir, io.Discard)
	p.send(2)
	p.send(3) // only the first call sends
	require.NoError(t, p.wait())
	for i := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("shard-%d-2", i)))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%d/2", i), strings.TrimSpace(string(b)))
	}
	none, err := filepath.Glob(filepath.Join(dir, "none-*"))
	require.NoError(t, err)
	assert.Len(t, none, 1, "the third process was given no shard")

	// Processes that end before their shard comes: wait returns.
	p = startShards(t.Context(), "test", sh, []string{"-c", "exit 0"}, invocation.Invocation{}, 2, dir, io.Discard)
	p.send(2)
	assert.NoError(t, p.wait())
	p = startShards(t.Context(), "test", sh, []string{"-c", "exit 3"}, invocation.Invocation{}, 2, dir, io.Discard)
	assert.ErrorContains(t, p.wait(), "exit status 3")
}
