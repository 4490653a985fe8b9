package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	code := simtest.Main(m)
	// The binary scalerBinary built goes with the run.
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// scalerBinary builds cmd/scaler once per test binary.
func scalerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "converge-scaler-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "scaler")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// runThroughProxy runs the scaler binary out of process, through chaos's
// TLS proxy with the scaler's own credentials upstream and leader election
// on, under plan: its Crash and Terminate faults become a real SIGKILL and
// SIGTERM of the binary. It returns the process and the run's history.
func runThroughProxy(t *testing.T, env *sim.Env, plan chaos.Plan, grace time.Duration) (*chaos.Process, *chaos.Log) {
	t.Helper()
	log := &chaos.Log{}
	var proc atomic.Pointer[chaos.Process]
	exits := make(chan chaos.Exit, 1)
	plan.Recorder = log
	plan.OnCrash = func() { exits <- proc.Load().Kill() }
	plan.OnTerminate = func() { exits <- proc.Load().Terminate() }
	inj, err := chaos.NewInjector(plan)
	require.NoError(t, err)
	proxy, err := chaos.NewProxy(env.ControllerConfig, inj)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, proxy.Close()) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, proxy.WriteKubeconfig(kubeconfig))

	health := freeAddr(t)
	var stderr syncBuffer
	p, err := chaos.StartProcess(chaos.ProcessConfig{
		Path: scalerBinary(t),
		Args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect",
			"--leader-elect-namespace=converge-system", "--leader-elect-name=" + env.Namespace,
			"--metrics-addr=0", "--health-addr=" + health, "--shutdown-grace=" + (grace / 2).String(), "--namespace=" + env.Namespace},
		Env:      []string{"POD_NAME=scaler-under-test"},
		Stderr:   &stderr,
		Grace:    grace,
		Recorder: log,
	})
	require.NoError(t, err)
	proc.Store(p)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("scaler stderr:\n%s\nhistory: %+v", stderr.String(), log.Firings())
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "ready: synced, leading, working")
	return p, log
}

// syncBuffer is a bytes.Buffer a process may write while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func leaseHolder(t *testing.T, env *sim.Env) string {
	t.Helper()
	lease, err := env.Observer.CoordinationV1().Leases("converge-system").Get(context.Background(), env.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// TestSIGTERMDrainsAndReleasesTheLease: a Terminate fault right after the
// binary's first scale write is a real SIGTERM; the binary exits 0 within
// its grace with its Lease released, and the exit is in the history.
func TestSIGTERMDrainsAndReleasesTheLease(t *testing.T) {
	_, env := simtest.RequireRun(t, "sigterm-")
	const grace = 6 * time.Second
	p, log := runThroughProxy(t, env, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Terminate(chaos.Target{Verbs: []string{"patch"}, Resource: "deployments", Name: "web"}), When: chaos.When{Nth: 1},
	}}}, grace)

	scaleWebAndWait(t, env, "the binary scaled the Deployment")
	exit := p.Exit()
	assert.Equal(t, 0, exit.Code, exit.String())
	assert.Equal(t, "SIGTERM", exit.Sent)
	assert.True(t, exit.WithinGrace, "exited %v after SIGTERM, grace %v", exit.ShutdownTime, grace)
	assert.Empty(t, leaseHolder(t, env), "Lease released")

	firings := log.Firings()
	require.Len(t, firings, 2)
	assert.Equal(t, "terminate", firings[0].Fault)
	assert.Equal(t, "exit", firings[1].Fault)
	assert.Contains(t, firings[1].Outcome, "exited with status 0")
	t.Logf("shutdown after SIGTERM: %v", exit.ShutdownTime)
}

// TestBinaryThroughTheFaultProxy: an injected 409 on the binary's first
// write is followed by a recomputed write, and a Crash right after that
// write is a real SIGKILL: the process dies at once, without releasing its
// Lease.
func TestBinaryThroughTheFaultProxy(t *testing.T) {
	_, env := simtest.RequireRun(t, "proxy-")
	web := chaos.Target{Verbs: []string{"patch"}, Resource: "deployments", Name: "web"}
	p, log := runThroughProxy(t, env, chaos.Plan{Injections: []chaos.Injection{
		{Fault: chaos.Conflict(web), When: chaos.When{Nth: 1}},
		{Fault: chaos.Crash(web), When: chaos.When{Nth: 1}}, // the first that took effect
	}}, 5*time.Second)

	scaleWebAndWait(t, env, "scaled through the proxy after the injected 409")
	exit := p.Exit()
	assert.Equal(t, "killed", exit.Signal, exit.String())
	assert.Equal(t, "SIGKILL", exit.Sent)
	assert.Equal(t, "scaler-under-test", leaseHolder(t, env), "a killed process cannot release its Lease")

	var faults []string
	for _, f := range log.Firings() {
		faults = append(faults, f.Fault+": "+f.Outcome)
	}
	require.Len(t, faults, 3, faults)
	assert.Equal(t, "conflict: answered 409 Conflict", faults[0])
	assert.Contains(t, faults[1], "crash: ")
	assert.Equal(t, "exit: ended by signal killed "+exit.ShutdownTime.Round(time.Millisecond).String()+" after SIGKILL", faults[2])
}

// scaleWebAndWait creates a managed 2-replica Deployment "web" whose pods
// never become ready, and waits until the scaler under test doubled it.
func scaleWebAndWait(t *testing.T, env *sim.Env, msg string) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{controller.LabelEnabled: controller.ValueEnabled}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
	_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *got.Spec.Replicas == 4
	}, time.Minute, 50*time.Millisecond, msg)
}
