package scenariotest_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-lab/converge/sim/simtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	simtest.BuildAsThisBinary()
	os.Exit(m.Run())
}

// TestScratchModule is a user's first hour: a fresh module outside this
// repository (testdata/scratch: a controller of its own with leader
// election, its RBAC, three scenario files, one test file calling
// scenariotest.Run with Faults) imports converge and passes a plain `go
// test`, on fake and on envtest, inside go test's default 10-minute
// timeout. With -converge.full and a timeout that cannot hold its runs in
// real time, it fails at the start, saying so. converge's dependencies come
// from the module cache (the build of converge itself put them there);
// what the new module's graph needs beyond them (go.mod files of modules
// converge's own build never loads) comes from the Go module proxy, as for
// any user.
func TestScratchModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/scratch")))
	goMod := "module example.com/labeler\n\ngo 1.26.0\n\nrequire github.com/converge-lab/converge v0.0.0\n\nreplace github.com/converge-lab/converge => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))

	// Built as this binary was (GOFLAGS, from TestMain), it shares the
	// build cache with this repository's own tests; no -timeout: go test's
	// default is what a user gets.
	goTest := func(args ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"test", "-count=1", "-v", "."}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := goTest("-converge.report=" + filepath.Join(dir, "report"))
	require.NoError(t, err, "%s\n...\n%s", failures(out), tail(out, 30))
	for _, run := range []string{"owners-under-conflicts/fake", "owners/fake", "team-moves/fake", "owners-conflicts/fake",
		"team-moves-leader-failover/fake", "owners-watch-410s/fake"} {
		assert.Contains(t, out, "--- PASS: TestScenarios/"+run+"/seed-1")
	}
	if !strings.Contains(out, "SKIPPED (envtest)") {
		for _, s := range []string{"owners-under-conflicts", "owners", "team-moves"} {
			assert.Contains(t, out, "--- PASS: TestScenarios/"+s+"/envtest/seed-1")
		}
	}
	assert.NotContains(t, out, "owners-conflicts/envtest", "the fault profiles run on fake unless asked for")
	assert.Contains(t, out, "and 3 in real time", "the plan is told at the start")
	assert.Contains(t, out, "-converge.full adds 22 more in real time")
	var results []string
	require.NoError(t, fs.WalkDir(os.DirFS(dir), "report", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".json") {
			results = append(results, path)
		}
		return err
	}))
	assert.NotEmpty(t, results, "the results are written where -converge.report says")
	assert.FileExists(t, filepath.Join(dir, "report", "index.html"))

	// The whole matrix under a timeout that cannot hold it: told at once.
	out, err = goTest("-timeout=40s", "-converge.full")
	require.Error(t, err, "%s", tail(out, 30))
	assert.Contains(t, out, "go test would kill the test before they end", tail(out, 30))
	assert.Contains(t, out, "25 in real time")
	assert.NotContains(t, out, "test timed out", "it failed at the start, not at the kill")
}

// failures are the lines of out that say why a run failed.
func failures(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "--- FAIL") || strings.Contains(l, "failed:") || strings.Contains(l, "never fired") || strings.HasPrefix(strings.TrimSpace(l), "invariant") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
