package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// runWithin is run, failing t when the command has not returned after a
// deadline: a command that waits on a pipe shows as a failure, not a hang.
func runWithin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	type outcome struct {
		out string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		out, err := run(t, args...)
		done <- outcome{out, err}
	}()
	select {
	case o := <-done:
		return o.out, o.err
	case <-time.After(20 * time.Second):
		t.Fatalf("converge %q still runs after 20s", args)
		return "", nil
	}
}

// Every file a command reads or writes by a user's name is refused, by
// name and kind, when it is a pipe: a scenario, an object file it names by
// a relative path, a result, a kubeconfig, a JUnit file.
func TestPipesNamedToTheCLIAreRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	pipeJSON := filepath.Join(dir, "result.json")
	require.NoError(t, syscall.Mkfifo(pipeJSON, 0o644))
	scenario := writeFile(t, filepath.Join(dir, "s.yaml"), "name: s\ncatches: x\nobjects: [{file: fifo.yaml}]\n")
	results := t.TempDir()
	_, err := reports.Write(results, &reports.Result{Schema: reports.SchemaVersion, Scenario: "s", Backend: "fake", Seed: 1, Pass: true,
		Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}})
	require.NoError(t, err)
	isPipe := func(name string) string { return name + " is a named pipe (FIFO), not a regular file" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", scenario}, isPipe(fifo)},
		{[]string{"run", fifo}, isPipe(fifo)},
		{[]string{"explore", scenario}, isPipe(fifo)},
		{[]string{"judge", pipeJSON}, isPipe(pipeJSON)},
		{[]string{"judge", "--scenario", scenario, dir}, isPipe(fifo)},
		{[]string{"replay", pipeJSON}, isPipe(pipeJSON)},
		{[]string{"shrink", pipeJSON}, isPipe(pipeJSON)},
		{[]string{"run", "baseline", "--junit", fifo}, isPipe(fifo)},
		{[]string{"merge", results, "--report", filepath.Join(dir, "merged"), "--junit", fifo}, isPipe(fifo)},
		{[]string{"run", "baseline", "--backend", "cluster", "--kubeconfig", fifo}, isPipe(fifo)},
		{[]string{"run", "baseline", "--test-binary", fifo}, isPipe(fifo)},
	} {
		out, err := runWithin(t, tc.args...)
		require.Error(t, err, "%q: %s", tc.args, out)
		assert.ErrorContains(t, err, tc.want, tc.args)
	}
	_, err = os.Stat(fifo)
	require.NoError(t, err, "the pipe is left as it was")
}
