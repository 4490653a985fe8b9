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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/config"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

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

// TestSIGTERMDrainsAndReleasesTheLease runs the scaler binary against the
// envtest control plane, as the ServiceAccount config/ binds, with leader
// election: it scales a Deployment, then a SIGTERM makes it exit 0 within
// its grace with the Lease released.
func TestSIGTERMDrainsAndReleasesTheLease(t *testing.T) {
	cp, env := envtest.RequireRun(t, "sigterm-")
	ctx := context.Background()

	user, err := cp.AddUser(crenvtest.User{Name: config.ScalerUser, Groups: config.ScalerGroups})
	require.NoError(t, err)
	kubeconfig, err := user.KubeConfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kubeconfig, 0o600))

	health := freeAddr(t)
	const grace = 5 * time.Second
	var stderr bytes.Buffer
	cmd := exec.Command(scalerBinary(t), "--kubeconfig="+path, "--leader-elect",
		"--leader-elect-namespace=converge-system", "--leader-elect-name="+env.Namespace,
		"--metrics-addr=0", "--health-addr="+health, "--shutdown-grace="+grace.String(), "--namespace="+env.Namespace)
	cmd.Env = append(os.Environ(), "POD_NAME=scaler-under-test")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("scaler stderr:\n%s", stderr.String())
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

	scaleWebAndWait(t, env, "the binary scaled the Deployment")

	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		assert.NoError(t, err, "exit status 0")
		assert.Less(t, time.Since(sent), grace, "exited within its grace")
	case <-time.After(2 * grace):
		t.Fatal("the scaler did not exit after SIGTERM")
	}
	lease, err := env.Observer.CoordinationV1().Leases("converge-system").Get(ctx, env.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "Lease released")
}

// TestBinaryThroughTheFaultProxy runs the scaler binary out of process
// through chaos's TLS proxy, with the scaler's own credentials upstream: an
// injected 409 on its first write is followed by a recomputed write, and a
// SIGKILL ends it at once, without releasing its Lease.
func TestBinaryThroughTheFaultProxy(t *testing.T) {
	_, env := envtest.RequireRun(t, "proxy-")
	ctx := context.Background()

	log := &chaos.Log{}
	inj, err := chaos.NewInjector(chaos.Plan{Recorder: log, Injections: []chaos.Injection{{
		Fault: chaos.Conflict(chaos.Target{Resource: "deployments", Name: "web"}), When: chaos.When{Nth: 1},
	}}})
	require.NoError(t, err)
	proxy, err := chaos.NewProxy(env.ControllerConfig, inj)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, proxy.Close()) })
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, proxy.WriteKubeconfig(path))

	health := freeAddr(t)
	var stderr bytes.Buffer
	cmd := exec.Command(scalerBinary(t), "--kubeconfig="+path, "--leader-elect",
		"--leader-elect-namespace=converge-system", "--leader-elect-name="+env.Namespace,
		"--metrics-addr=0", "--health-addr="+health, "--namespace="+env.Namespace)
	cmd.Env = append(os.Environ(), "POD_NAME=scaler-behind-proxy")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("scaler stderr:\n%s", stderr.String())
		}
	})

	scaleWebAndWait(t, env, "scaled through the proxy after the injected 409")
	require.Len(t, log.Firings(), 1)
	assert.Contains(t, log.Firings()[0].Outcome, "409")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, -1, exit.ExitCode(), "killed by a signal")
	case <-time.After(10 * time.Second):
		t.Fatal("not dead after SIGKILL")
	}
	lease, err := env.Observer.CoordinationV1().Leases("converge-system").Get(ctx, env.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "scaler-behind-proxy", ptr.Deref(lease.Spec.HolderIdentity, ""), "a killed process cannot release its Lease")
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
