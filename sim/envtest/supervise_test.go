package envtest_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// ownPlane is a control plane of the test's own (a component of the
// shared one killed would fail the package's other tests), stopped when
// the test ends; its logs are kept with the test's artifacts when it fails.
func ownPlane(t *testing.T) *envtest.ControlPlane {
	t.Helper()
	simtest.Require(t) // skips or fails, as the shared one does, without binaries
	cp, err := envtest.StartControlPlane(t.Context())
	require.NoError(t, err)
	// Its outages are the test's own: their logs go with its artifacts
	// on a failure, not into a folder the plane keeps.
	t.Cleanup(func() { _ = cp.Stop(); _ = os.RemoveAll(cp.Dir()) })
	simtest.KeepLogsOnFailure(t, cp) // runs before Stop
	return cp
}

// runOnce is a run on cp as a test makes one: a namespace, a Deployment
// whose ReplicaSet the real controller manager makes, and a Stop that
// deletes the namespace. It returns how long it took.
func runOnce(t *testing.T, cp *envtest.ControlPlane) time.Duration {
	t.Helper()
	began := time.Now()
	b, err := envtest.NewBackend(cp, "supervised-")
	require.NoError(t, err)
	env, err := b.Start(t.Context())
	require.NoError(t, err)
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(t.Context(), deployment("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return podCount(t, env.Observer, env.Namespace, "web") == 2 },
		30*time.Second, 50*time.Millisecond, "kube-controller-manager creates the pods")
	require.NoError(t, b.Stop(), "the namespace goes")
	return time.Since(began)
}

// outageAfter waits until cp reports an outage after the n it had.
func outageAfter(t *testing.T, cp *envtest.ControlPlane, n int) sim.Outage {
	t.Helper()
	for {
		outages, next := cp.Outages()
		if len(outages) > n {
			return outages[n]
		}
		select {
		case <-next:
		case <-time.After(30 * time.Second):
			t.Fatal("no outage reported 30s after the kill")
		}
	}
}

// A component killed between two runs is started again with its flags, the
// outage says how it ended, and the next run passes without waiting on the
// dead one (before the supervisor, it waited two minutes for a namespace
// no controller deleted, then failed).
func TestAKilledComponentIsRestartedForTheNextRun(t *testing.T) {
	for _, component := range []string{"kube-controller-manager", "etcd", "kube-apiserver"} {
		t.Run(component, func(t *testing.T) {
			t.Parallel()
			cp := ownPlane(t)
			runOnce(t, cp)

			pid := cp.PID(component)
			require.NotZero(t, pid)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			o := outageAfter(t, cp, 0)
			assert.Equal(t, component, o.Component)
			assert.Equal(t, "signal: killed", o.Exit)
			assert.FileExists(t, o.Log)

			took := runOnce(t, cp)
			assert.Less(t, took, time.Minute, "the next run did not wait on a dead component")
			outages, _ := cp.Outages()
			require.Len(t, outages, 1)
			assert.False(t, outages[0].Restarted.IsZero(), "it served again: %s", outages[0])
			assert.NotEqual(t, pid, cp.PID(component), "a new process")
			assert.NoError(t, cp.Err())
		})
	}
}

// A component that cannot be started again breaks the plane: the next run
// fails at once, naming it and quoting its log, rather than after a wait.
func TestAComponentThatCannotRestartFailsTheNextRunAtOnce(t *testing.T) {
	cp := ownPlane(t)
	// Its kubeconfig gone, kube-controller-manager exits as soon as it
	// starts, every time.
	require.NoError(t, os.WriteFile(cp.ControllerManagerKubeconfig(), []byte("not a kubeconfig"), 0o600))
	require.NoError(t, syscall.Kill(cp.PID("kube-controller-manager"), syscall.SIGKILL))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.Error(t, waitBroken(ctx, cp), "the plane gives up on it")
	err := cp.Err()
	assert.ErrorContains(t, err, "kube-controller-manager exited (signal: killed) and could not be started again")
	assert.ErrorContains(t, err, "its whole log")

	began := time.Now()
	b, berr := envtest.NewBackend(cp, "broken-")
	require.NoError(t, berr)
	_, err = b.Start(t.Context())
	assert.ErrorContains(t, err, "kube-controller-manager")
	assert.Less(t, time.Since(began), 5*time.Second, "at once")
}

// waitBroken returns the plane's error once it has one.
func waitBroken(ctx context.Context, cp *envtest.ControlPlane) error {
	for {
		if err := cp.Err(); err != nil {
			return err
		}
		_, next := cp.Outages()
		select {
		case <-next:
		case <-ctx.Done():
			return nil
		}
	}
}

// A run that asked for the API server's restart and ended before the plane
// was ready again does not leave it unready: it settles all the same, and
// the next run starts on it (before, the plane stayed unready for good,
// and every later run waited three minutes for it and failed).
func TestARestartWhoseRunEndedStillSettles(t *testing.T) {
	cp := ownPlane(t)
	runOnce(t, cp)
	// The run ends as soon as the restart begins (the plane's first
	// change), long before the API server is back.
	_, changed := cp.Outages()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-changed
		cancel()
	}()
	err := cp.RestartAPIServer(ctx)
	require.ErrorIs(t, err, context.Canceled, "the run ended before the plane was ready again")

	wait, stop := context.WithTimeout(t.Context(), 2*time.Minute)
	defer stop()
	require.NoError(t, cp.WaitReady(wait), "the plane is ready again")
	assert.NoError(t, cp.Err())
	took := runOnce(t, cp)
	assert.Less(t, took, time.Minute, "the next run did not wait on an unready plane")
}

// A start that fails once the components run returns its error with their
// log tails (before, its clean-up read the nil plane the failed start
// returned and panicked: a shared plane that could not settle on a starved
// machine failed every later run of its test binary with the panic).
func TestAFailedStartSaysWhy(t *testing.T) {
	simtest.Require(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the components start; the first request made with ctx fails
	var cp *envtest.ControlPlane
	var err error
	require.NotPanics(t, func() { cp, err = envtest.StartControlPlane(ctx) })
	require.Error(t, err)
	assert.Nil(t, cp)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "kube-apiserver (")
	assert.ErrorContains(t, err, "etcd (")
}

// A port envtest chose and another process bound before the API server
// did (envtest releases them for it) makes the API server exit at once:
// the plane is started again, on another port, and serves.
func TestAStartWhosePortWasTakenIsMadeAgain(t *testing.T) {
	tier.Full(t, "a plane of its own, started twice")
	simtest.Require(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var attempts []int
	envtest.SetAPIServerPort(t, func(attempt int) int {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			return taken.Addr().(*net.TCPAddr).Port
		}
		return 0
	})
	cp := ownPlane(t)
	assert.Equal(t, []int{1, 2}, attempts, "started again, once")
	assert.NotContains(t, cp.AdminConfig().Host, ":"+strconv.Itoa(taken.Addr().(*net.TCPAddr).Port))
	runOnce(t, cp)
}
