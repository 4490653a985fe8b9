package scenariotest_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScratchModule is a user's first hour: a fresh module outside this
// repository (testdata/scratch: a controller of its own, its RBAC, one
// scenario file, one test file calling scenariotest.Run) imports converge
// and passes `go test`, on fake and on envtest. converge's dependencies
// come from the module cache (the build of converge itself put them there);
// what the new module's graph needs beyond them (go.mod files of modules
// converge's own build never loads) comes from the Go module proxy, as for
// any user.
func TestScratchModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a module of its own")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/scratch")))
	goMod := "module example.com/labeler\n\ngo 1.26.8\n\nrequire github.com/converge-lab/converge v0.0.0\n\nreplace github.com/converge-lab/converge => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))

	// -race shares the build cache with this repository's own tests.
	cmd := exec.Command("go", "test", "-race", "-count=1", "-v", ".", "-converge.report="+filepath.Join(dir, "report"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", tail(string(out), 60))
	assert.Contains(t, string(out), "--- PASS: TestScenarios/owners-under-conflicts/fake/seed-1")
	if !strings.Contains(string(out), "SKIPPED (envtest)") {
		assert.Contains(t, string(out), "--- PASS: TestScenarios/owners-under-conflicts/envtest/seed-1")
	}
	var results []string
	require.NoError(t, fs.WalkDir(os.DirFS(dir), "report", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".json") {
			results = append(results, path)
		}
		return err
	}))
	assert.NotEmpty(t, results, "the results are written where -converge.report says")
	assert.FileExists(t, filepath.Join(dir, "report", "index.html"))
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
