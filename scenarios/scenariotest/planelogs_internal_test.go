package scenariotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// A failed run's control-plane logs are quoted, their last lines only, and
// kept with the test's artifacts.
func TestPlaneLogsAreQuotedAndKept(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "kube-controller-manager.log")
	var lines []string
	for i := range 30 {
		lines = append(lines, "line "+strings.Repeat("x", i%3)+string(rune('a'+i%26)))
	}
	require.NoError(t, os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	said := planeLogs(t, &reports.Result{PlaneLogs: map[string]string{"kube-controller-manager": log}})
	assert.Contains(t, said, "kube-controller-manager ("+log+")")
	assert.Contains(t, said, lines[29])
	assert.Contains(t, said, lines[20])
	assert.NotContains(t, said, lines[19]+"\n", "ten lines, not the whole log")
	kept, err := os.ReadFile(filepath.Join(t.ArtifactDir(), "kube-controller-manager.log"))
	require.NoError(t, err)
	assert.Equal(t, strings.Join(lines, "\n")+"\n", string(kept))

	assert.Empty(t, planeLogs(t, &reports.Result{}), "a run on a plane that keeps none")
}
