package envtest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" && mode != "test-timeout" {
		os.Exit(leakHelper(mode))
	}
	os.Exit(simtest.Main(m))
}

// TestHelperHangs is the child of the test-timeout case: it starts a control
// plane and blocks until `go test -timeout` panics the binary.
func TestHelperHangs(t *testing.T) {
	if os.Getenv(helperEnv) != "test-timeout" {
		t.Skip("helper of TestNoProcessOutlivesItsTestBinary")
	}
	os.Exit(leakHelper("hang"))
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{controller.LabelEnabled: controller.ValueEnabled}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
}

func podCount(t *testing.T, c kubernetes.Interface, ns, app string) int {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	return len(pods.Items)
}

func TestRealControllersRunDeployments(t *testing.T) {
	_, env := simtest.RequireRun(t, "")
	var err error
	ctx := context.Background()
	assert.True(t, env.Can.Has("real-controllers"))

	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, deployment("web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return podCount(t, env.Observer, env.Namespace, "web") == 3 },
		30*time.Second, 50*time.Millisecond, "kube-controller-manager creates the pods")

	require.NoError(t, env.Observer.AppsV1().Deployments(env.Namespace).Delete(ctx, "web", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}))
	require.Eventually(t, func() bool { return podCount(t, env.Observer, env.Namespace, "web") == 0 },
		30*time.Second, 50*time.Millisecond, "the garbage collector removes them")
}

// TestStopRemovesTheNamespace: envtest has no kubelet, so a pod bound to a
// Node stays terminating after its namespace is deleted, and the namespace
// with it, unless Stop finishes the pods. When Stop returns, nothing of the
// run is left for the control plane's controllers to work on.
func TestStopRemovesTheNamespace(t *testing.T) {
	cp := simtest.Require(t)
	b, err := envtest.NewBackend(cp, "stop-")
	require.NoError(t, err)
	ctx := t.Context()
	env, err := b.Start(ctx)
	require.NoError(t, err)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "stop-node-"}}
	node, err = env.Observer.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Observer.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, deployment("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Spec: corev1.PodSpec{NodeName: node.Name,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
	}
	_, err = env.Observer.CoreV1().Pods(env.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return podCount(t, env.Observer, env.Namespace, "web") == 2 },
		30*time.Second, 50*time.Millisecond, "kube-controller-manager creates the Deployment's pods")

	require.NoError(t, b.Stop())
	_, err = env.Observer.CoreV1().Namespaces().Get(ctx, env.Namespace, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the namespace is gone when Stop returns: %v", err)
	require.NoError(t, b.Stop(), "a second Stop does nothing")
}

// TestScalerRBACIsSufficientAndLeast runs the scaler in-process as the
// ServiceAccount config/ binds, with leader election: it must be able to do
// its job, and nothing it does not need.
func TestScalerRBACIsSufficientAndLeast(t *testing.T) {
	cp, env := simtest.RequireRun(t, "")
	ctx := context.Background()

	client, err := kubernetes.NewForConfig(cp.ScalerConfig())
	require.NoError(t, err)
	ctl, err := controller.New(controller.Config{
		Namespace:      env.Namespace, // other runs' Deployments may linger on the shared control plane
		LeaderElection: &controller.LeaderElectionConfig{Namespace: "converge-system", Identity: t.Name(), Name: strings.ToLower(env.Namespace)},
	}, client)
	require.NoError(t, err)
	_, logCtx := ktesting.NewTestContext(t)
	runCtx, cancel := context.WithCancel(logCtx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	// Pods are created by kube-controller-manager but nothing runs them, so
	// none is ready: the scaler doubles the Deployment.
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, deployment("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 4
	}, 60*time.Second, 100*time.Millisecond, "the scaler scaled with config/'s RBAC")
	require.Eventually(t, func() bool {
		events, err := env.Observer.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + controller.ReasonScaledUp})
		return err == nil && len(events.Items) > 0
	}, 30*time.Second, 100*time.Millisecond, "and recorded its Event")

	err = client.CoreV1().Pods(env.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the scaler may not delete pods: %v", err)
	_, err = client.AppsV1().Deployments(env.Namespace).Create(ctx, deployment("other", 1), metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor create Deployments: %v", err)
	_, err = client.CoreV1().Secrets(env.Namespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor read Secrets: %v", err)
}

const (
	helperEnv = "CONVERGE_ENVTEST_LEAK_HELPER"
	markerEnv = "CONVERGE_ENVTEST_LEAK_MARKER"
)

// leakHelper starts a control plane in a child test binary and then dies the
// way a test run can: a panic, or waiting to be killed (a test timeout, Ctrl-C
// after the grace, SIGKILL).
func leakHelper(mode string) int {
	cp, err := envtest.StartControlPlane(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 3
	}
	fmt.Println("READY", cp.Dir())
	// Wait for the parent to have seen the processes, then die.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	switch mode {
	case "panic":
		panic("helper panics with a control plane running")
	default:
		select {} // until killed
	}
}

// TestNoProcessOutlivesItsTestBinary starts a control plane in a child test
// binary, kills the child (by a panic, then by SIGKILL) and looks for any
// process that carries the child's marker afterwards.
func TestNoProcessOutlivesItsTestBinary(t *testing.T) {
	simtest.Require(t)
	for _, mode := range []string{"panic", "sigkill", "sigint", "test-timeout"} {
		t.Run(mode, func(t *testing.T) {
			marker := fmt.Sprintf("%s-%d", mode, time.Now().UnixNano())
			args := []string{"-test.run=^$"}
			if mode == "test-timeout" {
				args = []string{"-test.run=^TestHelperHangs$", "-test.timeout=20s"}
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), helperEnv+"="+mode, markerEnv+"="+marker)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			buf := make([]byte, 4096)
			n, _ := stdout.Read(buf) // blocks until READY (or the child dies)
			require.Contains(t, string(buf[:n]), "READY")
			require.NotEmpty(t, marked(marker), "the child's control plane is running")

			switch mode {
			case "sigkill":
				require.NoError(t, cmd.Process.Kill())
			case "sigint": // Ctrl-C
				require.NoError(t, cmd.Process.Signal(os.Interrupt))
			default: // panic now, or hang until the test timeout panics
				_, err = stdin.Write([]byte("die\n"))
				require.NoError(t, err)
			}
			_ = cmd.Wait()
			require.Eventually(t, func() bool { return len(marked(marker)) == 0 }, 15*time.Second, 100*time.Millisecond,
				"processes left behind: %v", marked(marker))
		})
	}
}

// marked lists the processes whose environment carries marker.
func marked(marker string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(env), markerEnv+"="+marker) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		name := strings.SplitN(string(cmdline), "\x00", 2)[0]
		out = append(out, filepath.Base(filepath.Dir(p))+":"+filepath.Base(name))
	}
	return out
}

// TestAPIServerRestartBreaksAndRestoresWatches restarts kube-apiserver under
// a running informer: its watch breaks, it reconnects, and a pod created
// after the restart reaches its cache; kube-controller-manager reconnects
// too and keeps creating pods.
func TestAPIServerRestartBreaksAndRestoresWatches(t *testing.T) {
	_, env := simtest.RequireRun(t, "restart-")
	require.True(t, env.Can.Has(sim.APIServerRestart))
	simtest.CheckAPIServerRestart(t, env, deployment("after", 2))
}

// TestEtcdCompactionCompactsHistory compacts etcd: a read of etcd at a
// revision before the compaction fails, and CompactEtcd says up to which
// revision it compacted.
func TestEtcdCompactionCompactsHistory(t *testing.T) {
	cp, env := simtest.RequireRun(t, "compact-")
	simtest.CheckCompaction(t, env, cp.EtcdURL())
	cms, err := env.Observer.CoreV1().ConfigMaps(env.Namespace).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	rev, err := cp.CompactEtcd(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rev, mustInt64(t, cms.ResourceVersion), "a second compaction, at the current revision")
}

func mustInt64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}
