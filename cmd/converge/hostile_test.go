package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

const oneDeployment = `
name: %s
catches: nothing; a small scenario for the CLI's tests
objects:
  - count: 1
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
timing: {deadline: 1m, settle: 10s}
`

func scenarioFile(t *testing.T, path, name string) string {
	return writeFile(t, path, strings.Replace(oneDeployment, "%s", name, 1))
}

// The tracker reads the tests' output to its end: a line of megabytes (an
// unfired list of thousands of faults) neither stops it nor blocks the
// writer.
func TestProgressReadsPastLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	in := "=== RUN TestScenarios\n" + long + "\n" + "    --- PASS: TestScenarios/a/fake/seed-1 (0.10s)\n" + long + "\n    --- FAIL: TestScenarios/b/fake/seed-1 (0.20s)"
	var out bytes.Buffer
	r := strings.NewReader(in)
	tr := newTracker(&out, 2)
	tr.read(r)
	assert.Equal(t, 2, tr.done, out.String())
	assert.Equal(t, 1, tr.failed, out.String())
	assert.Equal(t, 0, r.Len(), "read to the end")
	assert.Contains(t, out.String(), "1/2  PASS  a/fake/seed-1")
	assert.Contains(t, out.String(), "2/2  FAIL  b/fake/seed-1")
}

// Firings at one instant have no order: two runs that fired the same faults
// at the same instants are the same schedule.
func TestSameFaultsComparesPerInstant(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	result := func(firings ...chaos.Firing) *reports.Result {
		return &reports.Result{Started: start, History: reports.History{Faults: firings}}
	}
	at := func(d time.Duration, fault, req string) chaos.Firing {
		return chaos.Firing{At: start.Add(d), Fault: fault, Request: req}
	}
	a := result(at(time.Second, "conflict", "PATCH web-0"), at(time.Second, "conflict", "PATCH web-1"), at(2*time.Second, "throttle", "LIST pods"))
	b := result(at(time.Second, "conflict", "PATCH web-1"), at(time.Second, "conflict", "PATCH web-0"), at(2*time.Second, "throttle", "LIST pods"))
	assert.Equal(t, "the same 3 firings at the same instants", sameFaults(a, b))
	c := result(at(time.Second, "conflict", "PATCH web-1"), at(3*time.Second, "conflict", "PATCH web-0"), at(2*time.Second, "throttle", "LIST pods"))
	assert.Contains(t, sameFaults(a, c), "differs")
	assert.Contains(t, sameFaults(a, result()), "differs")
}

// A test binary that fails for a reason of its own is named with its exit
// and its last output, not only as "no result".
func TestFailingTestBinarySaysWhy(t *testing.T) {
	dir := t.TempDir()
	// It cannot even list its scenarios.
	bin := writeFile(t, filepath.Join(dir, "broken.test"), "#!/bin/sh\necho 'panic: the scenario tests could not start' >&2\nexit 3\n")
	require.NoError(t, os.Chmod(bin, 0o755))
	out, err := run(t, "run", "baseline", "--report", filepath.Join(dir, "r"), "--test-binary", bin)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "exit status 3")
	assert.Contains(t, err.Error(), "panic: the scenario tests could not start")

	// It lists them, then dies running them.
	bin = writeFile(t, filepath.Join(dir, "dies.test"), `#!/bin/sh
for a in "$@" $CONVERGE_FLAGS; do
	if [ "$a" = -converge.list=true ]; then
		echo 'converge-scenario: {"test":"TestScenarios","name":"baseline","backends":["fake","envtest"]}'
		exit 0
	fi
done
echo 'panic: the controller could not start' >&2
exit 3
`)
	require.NoError(t, os.Chmod(bin, 0o755))
	out, err = run(t, "run", "baseline", "--report", filepath.Join(dir, "r"), "--test-binary", bin)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "panic: the controller could not start")
	assert.Contains(t, out, "NO RESULT baseline/fake/seed-1")

	// It lists nothing, or what it lists is not JSON.
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'ok'\n"), 0o755))
	out, err = run(t, "run", "--report", filepath.Join(dir, "r"), "--test-binary", bin)
	require.Error(t, err, out)
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), "lists no scenarios under -test.run ^TestScenarios$")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'converge-scenario: {not json'\n"), 0o755))
	_, err = run(t, "run", "--report", filepath.Join(dir, "r"), "--test-binary", bin)
	assert.ErrorContains(t, err, "listed a scenario converge cannot read")
}

// The report folder: stray JSON files and older results are left alone and
// never counted; a folder name with glob characters is a name; a comma in
// a scenario file's path is a comma.
func TestReportFolderHoldsOnlyThisInvocation(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "run[1]")
	notes := writeFile(t, filepath.Join(report, "notes.json"), "{not a result")
	older := &reports.Result{Schema: reports.SchemaVersion, Scenario: "small", Backend: "fake", Seed: 1, Pass: false,
		Reasons: []string{"an older failure"}, RunID: "older"}
	_, err := reports.Write(report, older)
	require.NoError(t, err)
	otherSeed := &reports.Result{Schema: reports.SchemaVersion, Scenario: "small", Backend: "fake", Seed: 9, Pass: false, RunID: "older"}
	_, err = reports.Write(report, otherSeed)
	require.NoError(t, err)

	file := scenarioFile(t, filepath.Join(dir, "a,b", "small.yaml"), "small")
	out, err := run(t, "run", file, "--report", report, "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	assert.Contains(t, out, "1 runs, 0 failed")
	assert.NotContains(t, out, "older failure")
	data, err := os.ReadFile(notes)
	require.NoError(t, err)
	assert.Equal(t, "{not a result", string(data), "a stray file is left alone")
	assert.FileExists(t, filepath.Join(report, "small_fake_9.json"))
	fresh, err := reports.Read(filepath.Join(report, "small_fake_1.json"))
	require.NoError(t, err)
	assert.True(t, fresh.Pass)
	assert.NotEqual(t, "older", fresh.RunID)
}

// Two scenarios under one name would overwrite each other's results.
func TestDuplicateScenarioNamesAreRefused(t *testing.T) {
	dir := t.TempDir()
	a := scenarioFile(t, filepath.Join(dir, "a.yaml"), "twin")
	b := scenarioFile(t, filepath.Join(dir, "b.yaml"), "twin")
	_, err := run(t, "run", a, b)
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), `two scenarios named "twin"`)
	baseline := scenarioFile(t, filepath.Join(dir, "baseline.yaml"), "baseline")
	_, err = run(t, "run", "baseline", baseline)
	assert.ErrorContains(t, err, `two scenarios named "baseline"`)
}

// A fault that never fires makes a run prove nothing: the summary counts it
// and the exit is 1, as the progress line's FAIL says.
func TestUnfiredFaultFailsTheInvocation(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "frob.yaml"), `
name: frob
catches: nothing; its fault targets a resource nothing serves
objects:
  - count: 1
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
faults:
  - {fault: conflict, target: {resource: frobnicators}}
timing: {deadline: 1m, settle: 10s}
`)
	out, err := run(t, "run", file, "--report", filepath.Join(dir, "r"), "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, out, "1 runs, 0 failed, 1 with a fault or check that never fired")
}

// replay runs the scenario the result holds, not a catalogue scenario of
// the same name.
func TestReplayRunsTheScenarioItHolds(t *testing.T) {
	dir := t.TempDir()
	file := scenarioFile(t, filepath.Join(dir, "baseline.yaml"), "baseline")
	report := filepath.Join(dir, "r")
	out, err := run(t, "run", file, "--seeds", "3", "--report", report, "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	before, err := reports.Read(filepath.Join(report, "baseline_fake_3.json"))
	require.NoError(t, err)
	assert.Len(t, before.Counters.Needed, 1, "one Deployment")
	assert.Contains(t, before.Replay, "-converge.file=")
	var spec map[string]any
	require.NoError(t, json.Unmarshal(before.Spec, &spec))

	out, err = run(t, "replay", filepath.Join(report, "baseline_fake_3.json"), "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	i := strings.Index(out, "result: ")
	require.GreaterOrEqual(t, i, 0, out)
	again, err := reports.Read(strings.TrimSpace(out[i+len("result: "):]))
	require.NoError(t, err)
	assert.Len(t, again.Counters.Needed, 1, "the replay ran the file's one Deployment, not the catalogue's five")
}

// One log file for the whole invocation, however many seeds: under a low
// limit on open files (two processes side by side need about 22), thirty
// seeds run.
func TestManySeedsUnderAFileLimit(t *testing.T) {
	t.Parallel() // it waits in real time (a control plane, a build): the others need not
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set the limit with")
	}
	dir := t.TempDir()
	cli := filepath.Join(dir, "converge")
	build := exec.Command("go", "build", "-o", cli, ".")
	outb, err := build.CombinedOutput()
	require.NoError(t, err, string(outb))
	file := scenarioFile(t, filepath.Join(dir, "small.yaml"), "small")
	cmd := exec.Command("sh", "-c", `ulimit -n 40 && exec "$0" run "$1" --seeds 1-30 --parallel 2 --report "$2" --test-binary "$3"`, cli, file, filepath.Join(dir, "r"), scenarioTests(t))
	outb, err = cmd.CombinedOutput()
	require.NoError(t, err, string(outb))
	assert.Contains(t, string(outb), "30 runs, 0 failed")
}
