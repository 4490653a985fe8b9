package scenarios_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
)

// The scaler binary, out of process through the fault proxy: a crash right
// after its first write is a real SIGKILL, a new process takes over 3 s
// later, the world converges, and every process is gone at the end. Its
// pods never become ready, so the scaler has writes to make (2 to 4 to 8)
// however long its process takes to start: with pods ready 5 s after they
// were made, a process that a busy machine started later than that found
// nothing to scale, and the crash never fired.
func TestOutOfProcessController(t *testing.T) {
	t.Parallel() // a namespace of its own
	simtest.Require(t)
	bin := scalerBinary(t)
	s := binaryScenario(t, bin, 3, `
name: out-of-process-crash
catches: a binary that does not recover from SIGKILL
backends: [envtest]
world: {readiness: {kind: never-ready}}
faults:
  - {fault: crash, target: {verbs: [patch], resource: deployments}, when: {nth: 1}}
timing: {deadline: 2m, settle: 10s}
`)
	var log strings.Builder
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: envtest.Kind{}, Seed: 1, Log: &syncWriter{b: &log}, Controller: scaler.For(s)})
	require.True(t, res.Pass, "%v\n%s", res.Reasons, log.String())
	assertExits(t, res, bin, "ended by signal killed", "exited with status 0")
}

// The same binary on a kwokctl cluster through the cluster backend and the
// fault proxy, with one worker so that its patches go one at a time: a 503
// on its first patch (retried), SIGKILL after the retry; its replacement
// starts against a view from before that patch (a lagging replica: its
// lists served at the older resourceVersion by the real API server for
// 2 s), and gets SIGTERM right after its first list of Deployments (which
// every replacement makes, whatever work is left); a new process takes
// over each time, kube-scheduler binds and kwok runs the pods (never
// ready, so that there are writes to make however late a process
// starts), and every process is gone at the end.
func TestOutOfProcessControllerOnKwok(t *testing.T) {
	t.Parallel() // the only run on the test binary's kwokctl cluster
	kc := simtest.RequireKwok(t)
	bin := scalerBinary(t)
	s := binaryScenario(t, bin, 4, `
name: out-of-process-kwok
catches: a binary that does not recover from SIGKILL or SIGTERM
backends: [cluster]
world: {readiness: {kind: never-ready}}
faults:
  - {fault: server-error, code: 503, target: {verbs: [patch], resource: deployments}, when: {nth: 1}}
  - {fault: crash, target: {verbs: [patch], resource: deployments}, when: {nth: 2}}
  - {fault: time-travel, writes: 1, hold: 2s, when: {restarted: true, count: 1}}
  - {fault: terminate, target: {verbs: [list], resource: deployments}, when: {restarted: true, count: 1}}
timing: {deadline: 3m, settle: 10s}
`, "--workers=1")
	b, err := cluster.New(cluster.Config{Kubeconfig: kc.Kubeconfig(), NamespacePrefix: "out-of-process-", ControlPlane: kc, Kwok: true,
		Controller: scenarios.IdentityOf(scaler.For(s))})
	require.NoError(t, err)
	var log strings.Builder
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: sim.Given(b), Seed: 1, Log: &syncWriter{b: &log}, Controller: scaler.For(s)})
	require.True(t, res.Pass, "%v\n%s", res.Reasons, log.String())
	fired := map[string]int{}
	for _, f := range res.History.Faults {
		fired[f.Fault]++
	}
	assert.Empty(t, res.Unfired, "%+v", res.History.Faults)
	assert.Equal(t, 1, fired["server-error"], "the 503 went through the proxy: %v", res.History.Faults)
	assert.Equal(t, 1, fired["time-travel"], "%v", res.History.Faults)
	assert.True(t, slices.ContainsFunc(res.History.Faults, func(f chaos.Firing) bool {
		return f.Fault == chaos.FaultTimeTravel && strings.HasPrefix(f.Outcome, "view set at resourceVersion ")
	}), "the real API server served the replacement's lists from the past: %+v", res.History.Faults)
	assertExits(t, res, bin, "ended by signal killed", "exited with status 0", "exited with status 0")
	assert.True(t, slices.ContainsFunc(res.History.Log, func(e reports.Entry) bool { return strings.Contains(e.What, "kwok's stages play them") }),
		"kwok's Stages played the pods")
}

// scalerBinary builds cmd/scaler into a temporary folder.
func scalerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scaler")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/scaler").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// binaryScenario parses spec (name, backends, world, faults, timing) with
// count opted-in Deployments and the scaler binary bin as the controller,
// flags after the usual ones, restarted 3 s after it ends.
func binaryScenario(t *testing.T, bin string, count int, spec string, flags ...string) *scenarios.Scenario {
	t.Helper()
	command := []string{bin, "--kubeconfig={kubeconfig}", "--namespace={namespace}", "--metrics-addr=0", "--health-addr=0", "--cooldown=10s"}
	quoted := make([]string, 0, len(command)+len(flags))
	for _, a := range append(command, flags...) {
		quoted = append(quoted, strconv.Quote(a))
	}
	s, err := scenarios.Parse(t.Name()+".yaml", []byte(spec+fmt.Sprintf(`controller: {restartAfter: 3s, command: [%s]}
objects:
  - count: %d
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
`, strings.Join(quoted, ", "), count)))
	require.NoError(t, err)
	return s
}

// assertExits checks each process's exit, in order, and that none is left.
func assertExits(t *testing.T, res *reports.Result, bin string, want ...string) {
	t.Helper()
	assert.Equal(t, "scaler", res.Controller)
	var exits []string
	for _, f := range res.History.Faults {
		if f.Fault == "exit" {
			exits = append(exits, f.Outcome)
		}
	}
	require.Len(t, exits, len(want), "each process, the last stopped at the end: %v", exits)
	for i, w := range want {
		assert.Contains(t, exits[i], w)
	}
	assert.Equal(t, len(want), res.Counters.Instances)
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
