package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

func TestSeedList(t *testing.T) {
	for in, want := range map[string][]uint64{"3": {1, 2, 3}, "5-7": {5, 6, 7}, "9,2": {9, 2}, "4,": {4}} {
		got, err := seedList(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"0", "x", "7-5", "1,x", "1-99999", ""} {
		_, err := seedList(bad)
		assert.Error(t, err, bad)
	}
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--seeds", "zero"},
		{"run", "--backend", "minikube"},
		{"run", "no-such-scenario"},
		{"run", "--nope"},
		{"frobnicate"},
		{"replay", "/nonexistent/result.json"},
	} {
		_, err := run(t, args...)
		require.Error(t, err, args)
		assert.Equal(t, 2, exitCode(err), "%v: %v", args, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\ncatches: x\nworkload: {replcas: 2}\n"), 0o644))
	_, err := run(t, "run", bad)
	assert.ErrorContains(t, err, "bad.yaml:3: workload.replcas: unknown field")
	assert.Equal(t, 2, exitCode(err))
}

func TestList(t *testing.T) {
	out, err := run(t, "list")
	require.NoError(t, err)
	assert.Contains(t, out, "NAME")
	assert.Contains(t, out, "baseline")
	assert.Regexp(t, `(?m)^throttle-storm +envtest +throttle `, out)
}

var (
	buildOnce sync.Once
	testBin   string
	buildErr  error
)

// scenarioTests builds the compiled scenario tests once.
func scenarioTests(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "converge-cli-")
		if err != nil {
			buildErr = err
			return
		}
		testBin = filepath.Join(dir, "converge-scenarios.test")
		out, err := exec.Command("go", "test", "-c", "-o", testBin, "../../scenarios").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	require.NoError(t, buildErr)
	return testBin
}

// run on fake: a passing catalogue scenario and a failing file, with the
// failure's reasons and replay command printed, results and JUnit written,
// and a non-zero exit.
func TestRunOnFake(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "too-few-writes.yaml")
	require.NoError(t, os.WriteFile(failing, []byte(`
name: too-few-writes
catches: nothing; its budget cannot be met
workload: {deployments: 3}
readiness: {kind: never-ready}
timing: {deadline: 2m, settle: 10s}
budgets: {requests: {patch: 1}}
`), 0o644))
	report := filepath.Join(dir, "report")
	junit := filepath.Join(dir, "junit.xml")
	out, err := run(t, "run", "baseline", failing, "--backend", "fake", "--seeds", "2", "--report", report, "--junit", junit, "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, out, "PASS  baseline/fake/seed-1")
	assert.Contains(t, out, "FAIL  too-few-writes/fake/seed-2")
	assert.Regexp(t, `budget: \d+ patch requests, budget 1`, out)
	assert.Contains(t, out, "replay: go test ./scenarios")
	assert.Contains(t, out, "4 runs, 2 failed")
	assert.Contains(t, out, "report:  "+filepath.Join(report, "index.html"))
	assert.FileExists(t, filepath.Join(report, "runs", "too-few-writes_fake_2.html"))

	results, err := reports.ReadDir(report)
	require.NoError(t, err)
	assert.Len(t, results, 4)
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	assert.Contains(t, string(x), `failures="2"`)

	// replay of the failing run: same verdict, same (empty) fault schedule.
	out, err = run(t, "replay", filepath.Join(report, "too-few-writes_fake_2.json"), "--file", failing, "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	assert.Regexp(t, `replay: pass=false budget: \d+ patch requests, budget 1`, out)
	assert.Contains(t, out, "fault schedule: the same 0 firings")
}

// report renders saved results again, names files that are not results,
// and refuses a folder with none.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	r := &reports.Result{Schema: reports.SchemaVersion, Scenario: "s", Backend: "fake", Seed: 4, Pass: true,
		Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}}
	_, err := reports.Write(dir, r)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "html")
	got, err := run(t, "report", dir, "--out", out)
	require.NoError(t, err, got)
	assert.Contains(t, got, "report: "+filepath.Join(out, "index.html"))
	assert.FileExists(t, filepath.Join(out, "runs", "s_fake_4.html"))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.json"), []byte("{not json"), 0o644))
	got, err = run(t, "report", dir, "--out", out)
	require.Error(t, err, got)
	assert.Contains(t, err.Error(), "notes.json")
	assert.Contains(t, got, "1 runs", "the readable results are still rendered")

	_, err = run(t, "report", t.TempDir())
	assert.ErrorContains(t, err, "no results")
	_, err = run(t, "report")
	assert.Equal(t, 2, exitCode(err))
}
