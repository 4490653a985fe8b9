package scenarios_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/simtest"
)

// The scaler binary, out of process through the fault proxy: a crash right
// after its first write is a real SIGKILL, a new process takes over 3 s
// later, the world converges, and every process is gone at the end.
func TestOutOfProcessController(t *testing.T) {
	if testing.Short() {
		t.Skip("envtest")
	}
	simtest.Require(t)
	bin := filepath.Join(t.TempDir(), "scaler")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/scaler").CombinedOutput()
	require.NoError(t, err, string(out))

	s, err := scenarios.Parse("out-of-process.yaml", []byte(fmt.Sprintf(`
name: out-of-process-crash
catches: a binary that does not recover from SIGKILL
backends: [envtest]
objects:
  - count: 3
    manifest:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web-{{index}}
        labels: {app: "web-{{index}}", converge.dev/scaler: enabled}
        annotations: {converge.dev/max-replicas: "8"}
      spec:
        replicas: 2
        selector: {matchLabels: {app: "web-{{index}}"}}
        template:
          metadata: {labels: {app: "web-{{index}}"}}
          spec: {containers: [{name: app, image: registry.invalid/app:1}]}
world: {readiness: {kind: ready-after-delay, delay: 5s}}
faults:
  - {fault: crash, target: {verbs: [patch], resource: deployments}, when: {nth: 1}}
controller:
  restartAfter: 3s
  command: [%q, "--kubeconfig={kubeconfig}", "--namespace={namespace}", "--metrics-addr=0", "--health-addr=0", "--cooldown=10s"]
timing: {deadline: 2m, settle: 10s}
`, bin)))
	require.NoError(t, err)
	var log strings.Builder
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: scenarios.Envtest, Seed: 1, Log: &syncWriter{b: &log}, Controller: scaler.For(s)})
	require.True(t, res.Pass, "%v\n%s", res.Reasons, log.String())
	assert.Equal(t, "scaler", res.Controller)
	var exits []string
	for _, f := range res.History.Faults {
		if f.Fault == "exit" {
			exits = append(exits, f.Outcome)
		}
	}
	require.Len(t, exits, 2, "the killed process and its replacement, stopped at the end")
	assert.Contains(t, exits[0], "ended by signal killed")
	assert.Contains(t, exits[1], "exited with status 0")
	assert.Equal(t, 2, res.Counters.Instances)
	assert.Empty(t, scalerProcesses(t, bin), "no process remains")
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// scalerProcesses lists the live processes running bin.
func scalerProcesses(t *testing.T, bin string) []string {
	t.Helper()
	var out []string
	paths, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range paths {
		if target, err := os.Readlink(p); err == nil && target == bin {
			out = append(out, p)
		}
	}
	return out
}
