package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest"
)

// TestMain: the scenario tests, the CLI and the users' tests these tests
// build are built as this binary is (with -race under make test), from
// the packages go test has compiled already. With $CONVERGE_TEST_AS_CLI
// set, this binary is the converge command itself (main's runMain), for
// tests that signal a converge process.
func TestMain(m *testing.M) {
	if os.Getenv(asCLI) != "" {
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	simtest.BuildAsThisBinary()
	code := m.Run()
	// The scenario tests scenarioTests built (170 MB) go with the run.
	if testBin != "" {
		_ = os.RemoveAll(filepath.Dir(testBin))
	}
	os.Exit(code)
}

func TestSeedList(t *testing.T) {
	for in, want := range map[string][]uint64{
		"3": {3}, "0": {0}, "5-7": {5, 6, 7}, "9,2": {9, 2}, "4,": {4}, "2,2,3": {2, 3},
		// The top of uint64: one seed, and a range that ends there.
		"18446744073709551615-18446744073709551615": {math.MaxUint64},
		"18446744073709551614-18446744073709551615": {math.MaxUint64 - 1, math.MaxUint64},
	} {
		got, err := seedList(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"x", "7-5", "1,x", "1-99999", "", ",", "18446744073709551616", "-3", "1-", "0-10000"} {
		_, err := seedList(bad)
		assert.Error(t, err, bad)
	}
	var many []string
	for i := range 10_001 {
		many = append(many, strconv.Itoa(i))
	}
	_, err := seedList(strings.Join(many, ","))
	assert.ErrorContains(t, err, "more than 10000 seeds")
}

func FuzzSeedList(f *testing.F) {
	for _, s := range []string{"1", "1-20", "3,9,12", "18446744073709551615-18446744073709551615", "0-9999", "7,", "-", ",,", "1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seeds, err := seedList(s)
		if err != nil {
			require.Contains(t, err.Error(), "--seeds")
			return
		}
		require.NotEmpty(t, seeds)
		require.LessOrEqual(t, len(seeds), maxSeeds)
		seen := map[uint64]bool{}
		for _, n := range seeds {
			require.False(t, seen[n], "seed %d twice", n)
			seen[n] = true
		}
	})
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
		{"run", "no-such-scenario", "--test-binary", scenarioTests(t)},
		{"run", "Not_A_Name"},
		{"run", ""},
		{"run", "--package", "./nope", "--test-binary", "x.test"},
		{"run", "--test-run", "("},
		{"run", "--package", "./no/such/package"},
		{"list", "--package", "./nope", "--test-binary", "x.test"},
		{"run", "--nope"},
		{"frobnicate"},
		{"replay", "/nonexistent/result.json"},
		{"replay"},
		{"replay", "a.json", "b.json"},
		{"report", "/nonexistent/results"},
		{"run", "baseline", "--seeds", "18446744073709551616"},
		{"run", "baseline", "--run-timeout", "0s"},
		{"run", "baseline", "--junit", "/nonexistent/folder/junit.xml"},
		{"run", "baseline", "--test-binary", "/nonexistent/converge-scenarios.test"},
		{"run", "baseline", "--backend", "cluster"},
		{"run", "baseline", "--backend", "cluster", "--kubeconfig", "/nonexistent/kubeconfig"},
		{"run", "baseline", "--kwok"},
		{"run", "baseline", "--backend", "cluster", "--kwok", "--kubeconfig", "/nonexistent/kubeconfig"},
		{"kwok", "extra", "--", "true"},
		{"run", "throttle-storm", "--backend", "fake", "--test-binary", scenarioTests(t)},
	} {
		_, err := run(t, args...)
		require.Error(t, err, args)
		assert.Equal(t, 2, exitCode(err), "%v: %v", args, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\ncatches: x\nworld: {nodez: 2}\n"), 0o644))
	_, err := run(t, "run", bad)
	assert.ErrorContains(t, err, "bad.yaml:3: world.nodez: unknown field")
	assert.Equal(t, 2, exitCode(err))
}

func TestList(t *testing.T) {
	out, err := run(t, "list")
	require.NoError(t, err)
	assert.Contains(t, out, "NAME")
	assert.Contains(t, out, "baseline")
	assert.Regexp(t, `(?m)^throttle-storm +envtest,cluster +throttle `, out)
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
		out, err := exec.Command("go", "test", "-c", "-o", testBin, "./testdata/catalogue").CombinedOutput()
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
world: {readiness: {kind: never-ready}}
timing: {deadline: 2m, settle: 10s}
budgets: {requests: {patch: 1}}
`), 0o644))
	report := filepath.Join(dir, "report")
	junit := filepath.Join(dir, "junit.xml")
	out, err := run(t, "run", "baseline", failing, "--backend", "fake", "--seeds", "1-2", "--report", report, "--junit", junit, "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	assert.Equal(t, 1, exitCode(err))
	assert.Contains(t, out, "PASS  baseline/fake/seed-1")
	assert.Contains(t, out, "FAIL  too-few-writes/fake/seed-2")
	assert.Regexp(t, `budget: \d+ patch requests, budget 1`, out)
	assert.Contains(t, out, "replay: converge replay "+filepath.Join(report, "too-few-writes_fake_2.json"))
	assert.Contains(t, out, "-converge.file="+failing)
	assert.Contains(t, out, "4 runs, 2 failed")
	assert.Contains(t, out, "report:  "+filepath.Join(report, "index.html"))
	assert.FileExists(t, filepath.Join(report, "runs", "too-few-writes_fake_2.html"))

	results, err := reports.ReadDir(report)
	require.NoError(t, err)
	assert.Len(t, results, 4)
	x, err := os.ReadFile(junit)
	require.NoError(t, err)
	assert.Contains(t, string(x), `failures="2"`)

	// replay of the failing run: same verdict, same (empty) fault schedule,
	// from the scenario the result holds.
	require.NoError(t, os.Remove(failing))
	out, err = run(t, "replay", filepath.Join(report, "too-few-writes_fake_2.json"), "--test-binary", scenarioTests(t))
	require.ErrorIs(t, err, errFailed, out)
	assert.Regexp(t, `replay: pass=false budget: \d+ patch requests, budget 1`, out)
	assert.Contains(t, out, "fault schedule: the same 0 firings")
	out, err = run(t, "replay", filepath.Join(report, "too-few-writes_fake_2.json"), "--kwok", "--test-binary", scenarioTests(t))
	assert.Equal(t, 2, exitCode(err), out)
	assert.ErrorContains(t, err, "is a run on fake: --kubeconfig and --kwok are for a run on a cluster")
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

	// A missing folder is said to be missing, and a path is never a
	// pattern: no sibling folders merged, no folder named "*" made.
	_, err = run(t, "report", filepath.Join(t.TempDir(), "gone"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	parent := t.TempDir()
	for _, sub := range []string{"a", "b"} {
		_, err := reports.Write(filepath.Join(parent, sub), r)
		require.NoError(t, err)
	}
	_, err = run(t, "report", filepath.Join(parent, "*"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoDirExists(t, filepath.Join(parent, "*"))
}

// A user's tests: converge lists and runs the scenarios of a package whose
// TestScenarios calls scenariotest.Run (the mirror example), runs a file
// against its controller, and replays its result only with its tests.
func TestRunAUsersTests(t *testing.T) {
	t.Parallel() // it waits in real time (a control plane, a build): the others need not
	pkg := "../../examples/mirror"
	out, err := run(t, "list", "--package", pkg)
	require.NoError(t, err, out)
	assert.Regexp(t, `(?m)^mirror +fake,envtest `, out)
	assert.Regexp(t, `(?m)^mirror-conflicts +fake,envtest +conflict `, out)
	assert.Regexp(t, `(?m)^mirror-throttle +envtest +throttle `, out)

	dir := t.TempDir()
	report := filepath.Join(dir, "r")
	out, err = run(t, "run", "mirror", "--package", pkg, "--report", report)
	require.NoError(t, err, out)
	assert.Contains(t, out, "PASS  mirror/fake/seed-1")
	assert.Contains(t, out, "1 runs, 0 failed")
	res, err := reports.Read(filepath.Join(report, "mirror_fake_1_mirror.json"))
	require.NoError(t, err)
	assert.True(t, res.Pass)
	// The package as it was named, from where converge ran.
	assert.Contains(t, res.Replay, "go test ../../examples/mirror -count=1 -run '^TestScenarios$/^mirror$/^fake$/^seed-1$'")
	if !testing.Short() {
		// It runs: go test builds the package anew, as the user's would.
		got := inShell(t, ".", res.Replay+" -v")
		assert.Contains(t, got, "--- PASS: TestScenarios/mirror/fake/seed-1", got)
		assert.NotRegexp(t, `seed-[02-9]`, got, "that seed alone")
	}

	_, err = run(t, "run", "mirrror", "--package", pkg, "--report", report)
	assert.ErrorContains(t, err, `no scenario named "mirrror"; there are: mirror, `)
	assert.Equal(t, 2, exitCode(err))

	// A file of the user's runs against their controller, not the scaler.
	spec, err := os.ReadFile(filepath.Join(pkg, "scenarios", "mirror.yaml"))
	require.NoError(t, err)
	crd, err := filepath.Abs(filepath.Join(pkg, "config", "crd", "mirrors.yaml"))
	require.NoError(t, err)
	again := strings.Replace(string(spec), "name: mirror\n", "name: again\n", 1)
	rel, err := filepath.Rel(dir, crd)
	require.NoError(t, err)
	again = strings.Replace(again, "../config/crd/mirrors.yaml", rel, 1)
	file := writeFile(t, filepath.Join(dir, "again.yaml"), again)
	out, err = run(t, "run", file, "--package", pkg, "--report", report, "--seeds", "2")
	require.NoError(t, err, out)
	assert.Contains(t, out, "PASS  again/fake/seed-2")

	result := filepath.Join(report, "mirror_fake_1_mirror.json")
	_, err = run(t, "replay", result)
	assert.ErrorContains(t, err, `a run of controller "mirror": pass its tests with --package or --test-binary`)
	out, err = run(t, "replay", result, "--package", pkg)
	require.NoError(t, err, out)
	assert.Contains(t, out, "replay: pass=true")
}

// Without kwok's binaries, --kwok and converge kwok say what to build
// before anything starts.
func TestKwokWithoutBinaries(t *testing.T) {
	t.Setenv("CONVERGE_KWOK_DIR", t.TempDir())
	for _, args := range [][]string{{"run", "baseline", "--backend", "cluster", "--kwok"}, {"kwok"}} {
		_, err := run(t, args...)
		require.Error(t, err, args)
		assert.Equal(t, 2, exitCode(err), "%v: %v", args, err)
		assert.ErrorContains(t, err, "make assets", args)
	}
}

// A failing cluster run's replay command says how to reach a cluster again;
// a fake run's does not.
func TestSummaryReplaysAClusterRunOnACluster(t *testing.T) {
	dir := t.TempDir()
	results := []*reports.Result{
		{Schema: reports.SchemaVersion, Scenario: "s", Backend: "cluster", Seed: 1, Reasons: []string{"goal"},
			Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}},
		{Schema: reports.SchemaVersion, Scenario: "s", Backend: "fake", Seed: 1, Reasons: []string{"goal"},
			Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}},
	}
	var out strings.Builder
	err := summarise(results, nil, summary{report: dir, flag: " --test-binary x", cluster: " --kwok"}, 0, &out)
	require.ErrorIs(t, err, errFailed)
	assert.Contains(t, out.String(), "replay: converge replay "+filepath.Join(dir, "s_cluster_1.json")+" --test-binary x --kwok\n")
	assert.Contains(t, out.String(), "replay: converge replay "+filepath.Join(dir, "s_fake_1.json")+" --test-binary x\n")
	kubeconfig := filepath.Join(dir, "a kubeconfig")
	assert.Equal(t, " --kubeconfig '"+kubeconfig+"'", (&plan{runFlags: runFlags{kubeconfig: kubeconfig}}).clusterFlag())
	assert.Equal(t, " --kwok", (&plan{runFlags: runFlags{kwok: true}}).clusterFlag())
}

// A scenario asked for on a backend it does not run on is no run, but a
// skip with its reason: in the summary and in JUnit, once across shards.
func TestAScenarioOnABackendItDoesNotRunOnIsSkipped(t *testing.T) {
	p := &plan{own: []scenariotest.Listed{{Name: "only-fake", Backends: []string{"fake"}}, {Name: "both", Backends: []string{"fake", "envtest"}}},
		runFlags: runFlags{backends: []string{"fake", "envtest"}}, shard: shard{0, 2}}
	notRun := p.notRun()
	require.Len(t, notRun, 1)
	assert.Equal(t, reports.NotRun{Scenario: "only-fake", Backend: "envtest", Why: "only-fake does not run on envtest: it runs on fake"}, notRun[0])
	p.shard = shard{1, 2}
	assert.Empty(t, p.notRun(), "the first shard says it")

	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	results := []*reports.Result{{Schema: reports.SchemaVersion, Scenario: "both", Backend: "fake", Seed: 1, Pass: true,
		Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}}}
	var out strings.Builder
	require.NoError(t, summarise(results, nil, summary{report: dir, junit: junit, notRun: notRun}, 0, &out))
	assert.Contains(t, out.String(), "\nSKIPPED only-fake/envtest: only-fake does not run on envtest: it runs on fake\n")
	assert.Contains(t, out.String(), "1 runs, 0 failed, 0 with a fault or check that never fired, 0 without a result, 0 skipped (and 1 scenario on a backend it does not run on, skipped)")
	raw, err := os.ReadFile(junit)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `<testcase name="only-fake/envtest" classname="converge.envtest"`)
	assert.Contains(t, string(raw), `<skipped message="only-fake does not run on envtest: it runs on fake" type="skipped">`)
}
