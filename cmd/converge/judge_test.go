package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// converge judge judges saved runs again without running them: under the
// scenario they ran, the same verdict; under a scenario file with a new
// invariant, that invariant's findings, each run saying what changed.
func TestJudgeSavedRuns(t *testing.T) {
	s, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	dir := t.TempDir()
	for _, seed := range []uint64{1, 2} {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: scaler.For(s)})
		require.True(t, res.Pass, "%v", res.Reasons)
		_, err := reports.Write(dir, res)
		require.NoError(t, err)
	}
	run := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"judge"}, args...), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}

	out, err := run(dir)
	require.NoError(t, err, out)
	assert.Contains(t, out, "PASS baseline fake seed 1\n")
	assert.Contains(t, out, "2 runs judged, 0 failed")

	// The scenario as a file, with one invariant more.
	file := filepath.Join(t.TempDir(), "baseline.yaml")
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "scaler", "catalogue", "baseline.yaml"))
	require.NoError(t, err)
	data = append(data, []byte(`invariants:
  - name: at-most-two
    select: {apiVersion: apps/v1, kind: Deployment, labels: converge.dev/scaler=enabled}
    rule: object.spec.replicas <= 2
`)...)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	judged := filepath.Join(t.TempDir(), "judged")
	out, err = run(dir, "--scenario", file, "--out", judged)
	assert.ErrorIs(t, err, errFailed, out)
	assert.Contains(t, out, "FAIL baseline fake seed 2; now fails [at-most-two]")
	assert.Contains(t, out, "2 runs judged, 2 failed")
	again, err := reports.ReadDir(judged)
	require.NoError(t, err)
	require.Len(t, again, 2)
	assert.False(t, again[0].Pass)
	assert.FileExists(t, filepath.Join(judged, "index.html"))
	before, err := reports.ReadDir(dir)
	require.NoError(t, err)
	assert.True(t, before[0].Pass, "the saved results are left as they were")

	// A run of another scenario, a file that is no result, no arguments.
	other := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(other, []byte(strings.Replace(string(data), "name: baseline", "name: other", 1)), 0o644))
	out, err = run(dir, "--scenario", other)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `a run of "baseline", the scenario is "other"`)
	assert.Contains(t, out, "0 runs judged")
	junk := filepath.Join(t.TempDir(), "junk.json")
	require.NoError(t, os.WriteFile(junk, []byte(`{"schema":"converge.dev/result/v9"}`), 0o644))
	_, err = run(junk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "converge.dev/result/v9")
	_, err = run()
	var u usageError
	assert.True(t, errors.As(err, &u), "%v", err)
}
