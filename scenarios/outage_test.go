package scenarios_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
)

// A run during which the control plane's kube-controller-manager dies gets
// no verdict: it ends at once as the harness's error naming the component,
// how it ended and its log, never as a PASS on a world with no Deployment
// controller. The plane starts it again, and the next run on the plane
// passes and notes the outage in its history.
func TestAnOutageOfTheControlPlaneGivesNoVerdict(t *testing.T) {
	t.Parallel() // a control plane of its own
	simtest.Require(t)
	cp, err := envtest.StartControlPlane(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Stop(); _ = os.RemoveAll(cp.Dir()) }) // the outage is the test's own
	s, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	opts := scenarios.Options{Backend: envtest.Kind{ControlPlane: cp}, Seed: 1, Controller: scaler.For(s)}

	// Killed once the run's namespace exists: the run has begun.
	admin, err := kubernetes.NewForConfig(cp.AdminConfig())
	require.NoError(t, err)
	killed := make(chan error, 1)
	go func() {
		for {
			nss, err := admin.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: sim.LabelRun})
			if err == nil && len(nss.Items) > 0 {
				killed <- syscall.Kill(controllerManagerPID(t, cp), syscall.SIGKILL)
				return
			}
			time.Sleep(20 * time.Millisecond) // polling another process's API server
		}
	}()
	res := scenarios.Run(t.Context(), s, opts)
	require.NoError(t, <-killed)
	assert.False(t, res.Pass)
	assert.Contains(t, res.Error, "no verdict")
	assert.Contains(t, res.Error, "kube-controller-manager exited (signal: killed)")
	assert.Contains(t, res.Error, "its whole log: ")
	assert.Less(t, time.Duration(res.Wall), time.Duration(s.Timing.Deadline), "it ended at once, not at the deadline")
	assert.FileExists(t, res.PlaneLogs["kube-controller-manager"], "the failed run names the plane's logs")

	res = scenarios.Run(t.Context(), s, opts)
	require.True(t, res.Pass, "%s %v", res.Error, res.Reasons)
	assert.Empty(t, res.PlaneLogs, "a passing run names none")
	var noted []string
	for _, e := range res.History.Log {
		if strings.HasPrefix(e.What, "before this run") {
			noted = append(noted, e.What)
		}
	}
	require.Len(t, noted, 1)
	assert.Contains(t, noted[0], "kube-controller-manager exited (signal: killed)")
	assert.Contains(t, noted[0], "restarted with the same flags")
}

// controllerManagerPID finds the plane's kube-controller-manager by the
// kubeconfig in its command line.
func controllerManagerPID(t *testing.T, cp *envtest.ControlPlane) int {
	marker := "--kubeconfig=" + filepath.Join(cp.Dir(), "kube-controller-manager.kubeconfig")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), marker+"\x00") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			return pid
		}
	}
	t.Errorf("no process with %s", marker)
	return 0
}
