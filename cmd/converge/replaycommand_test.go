package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tooFewWrites fails on every seed: its patch budget cannot be met.
var tooFewWrites = strings.Replace(oneDeployment, "%s", "too-few-writes", 1) +
	"world: {readiness: {kind: never-ready}}\nbudgets: {requests: {patch: 0}}\n"

// inShell runs a printed command line with sh in dir, as a user would
// paste it, this binary standing in for converge; it returns the output.
func inShell(t *testing.T, dir, line string, env ...string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + filepath.Dir(self) + string(os.PathListSeparator) + os.Getenv("PATH")}, env...)...)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// Every replay command a failing run prints runs that run again from
// where converge was run: the test binary (named relative to that folder,
// or absolute outside it) on the same scenario file, backend and seed, and
// converge replay on the result.
func TestPrintedReplayCommandsRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the printed commands with")
	}
	user := t.TempDir()
	writeFile(t, filepath.Join(user, "scenarios", "too-few-writes.yaml"), tooFewWrites)
	require.NoError(t, os.MkdirAll(filepath.Join(user, "bin"), 0o755))
	require.NoError(t, os.Symlink(scenarioTests(t), filepath.Join(user, "bin", "scenarios.test")))
	self, err := os.Executable()
	require.NoError(t, err)
	// converge as the user's shell finds it: this binary, as the CLI.
	require.NoError(t, os.Symlink(self, filepath.Join(user, "bin", "converge")))

	for _, tc := range []struct {
		name, flags, env, binary string
		// short: in the -short tier (about 6 s each here).
		short bool
	}{
		{"--test-binary below the folder", "--test-binary bin/scenarios.test", "", "./bin/scenarios.test", true},
		{"the catalogue's tests elsewhere", "", "CONVERGE_SCENARIOS_TEST=" + scenarioTests(t), scenarioTests(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && !tc.short {
				t.Skip("SKIPPED (-short): one folder layout is enough for the presubmit tier")
			}
			began := time.Now()
			out := inShell(t, user, "bin/converge run scenarios/too-few-writes.yaml --seeds 2 --report r "+tc.flags, asCLI+"=1", tc.env)
			require.Contains(t, out, "FAIL too-few-writes/fake/seed-2", out)
			replay := regexp.MustCompile(`(?m)^  replay: (converge replay .*)$`).FindStringSubmatch(out)
			or := regexp.MustCompile(`(?m)^  or: +(.*)$`).FindStringSubmatch(out)
			require.NotNil(t, replay, out)
			require.NotNil(t, or, out)
			assert.True(t, strings.HasPrefix(or[1], tc.binary+" -test.count=1 -test.run "), or[1])
			assert.NotContains(t, or[1], "go test ./bin", "bin is no package")

			// The tests run directly: that scenario file's run on fake
			// under seed 2, and it fails again.
			got := inShell(t, user, or[1]+" -test.v")
			assert.Contains(t, got, "--- FAIL: TestScenarios/too-few-writes/fake/seed-2", got)
			assert.NotRegexp(t, `seed-[013-9]`, got, "that seed alone")
			assert.Regexp(t, `budget: \d+ patch requests, budget 0`, got)

			// converge replay, from the same folder, with this binary as
			// converge: the same run, failing the same way.
			got = inShell(t, user, "bin/"+replay[1], asCLI+"=1", tc.env)
			assert.Regexp(t, `replay: pass=false budget: \d+ patch requests, budget 0`, got)
			assert.Regexp(t, `result: \S+/too-few-writes_fake_2\.json`, got)
			t.Logf("a run and its two replays in %v", time.Since(began).Round(time.Millisecond))
		})
	}
}
