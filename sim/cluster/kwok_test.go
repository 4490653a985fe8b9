package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/kwok"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

// kwokRun starts the cluster backend on the shared kwokctl cluster, with
// the cluster as its control plane, and a world that neither schedules,
// renews Leases nor plays pods: kube-scheduler and kwok do, the pods
// through the Stages of kwok.PodStages (ready 1 s after binding).
func kwokRun(t *testing.T, prefix string) (*kwok.Cluster, *sim.Env) {
	t.Helper()
	kc := simtest.RequireKwok(t)
	keepLogs(t, kc)
	b, err := cluster.New(cluster.Config{Kubeconfig: kc.Kubeconfig(), NamespacePrefix: prefix, ControlPlane: kc, Kwok: true})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Stop()) })

	require.True(t, env.Can.Has(sim.KwokNodes))
	model := world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second}
	stages, err := kwok.PodStages(env.Namespace, model)
	require.NoError(t, err)
	remove, err := kwok.InstallPodStages(context.Background(), env.RESTConfig, stages)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, remove(context.Background())) })
	w, err := world.New(world.Config{Client: env.Observer, Namespace: env.Namespace, Nodes: 2, Untainted: true,
		NodesByStage: true, PodsByStage: true, Readiness: model})
	require.NoError(t, err)
	_, logCtx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(logCtx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	require.Eventually(t, func() bool { return len(w.Nodes()) == 2 }, 30*time.Second, 20*time.Millisecond)
	return kc, env
}

func placedDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
	world.Placement(&d.Spec.Template.Spec, ns)
	return d
}

// TestKwokClusterSchedulesAndKeepsNodes runs on a kwokctl cluster: pods of a
// Deployment are created by kube-controller-manager, bound to the run's
// Nodes by kube-scheduler and made ready by kwok's Stages (the world does
// neither here), and the Nodes' Leases are renewed by kwok (the world does
// not renew them). Scaled down, the pods go through kwok's delete Stage.
func TestKwokClusterSchedulesAndKeepsNodes(t *testing.T) {
	kc, env := kwokRun(t, "kwok-")
	ctx := context.Background()
	assert.True(t, env.Can.Has(sim.APIServerRestart), "a cluster of our own can be restarted")
	assert.True(t, env.Can.Has(sim.EtcdCompaction))
	t.Logf("kwok cluster ready in %v", kc.Started)

	_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, placedDeployment(env.Namespace, "web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 3
	}, time.Minute, 100*time.Millisecond, "three pods ready")

	pods, err := env.Observer.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	for _, p := range pods.Items {
		assert.True(t, strings.HasPrefix(p.Spec.NodeName, env.Namespace+"-node-"), "%s on %q", p.Name, p.Spec.NodeName)
	}
	for _, p := range pods.Items {
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		require.NotNil(t, p.Status.StartTime)
		ready := p.Status.Conditions[len(p.Status.Conditions)-1]
		assert.Equal(t, corev1.PodReady, ready.Type)
		assert.Equal(t, corev1.ConditionTrue, ready.Status)
	}
	events, err := env.Observer.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "Scheduled").String()})
	require.NoError(t, err)
	assert.Len(t, events.Items, 3, "kube-scheduler reported each binding")

	nodes, err := env.Observer.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: world.LabelRun + "=" + env.Namespace})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2)
	for _, n := range nodes.Items {
		require.Eventually(t, func() bool {
			lease, err := env.Observer.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" && lease.Spec.RenewTime != nil
		}, time.Minute, 100*time.Millisecond, "kwok holds and renews a Lease for %s (the world keeps none here)", n.Name)
	}

	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pods, err := env.Observer.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 1
	}, time.Minute, 100*time.Millisecond, "the pods scaled away are deleted by kwok's delete stage, as a kubelet would")
}

// TestKwokRunPodsStayOnTheRunsNodes leaves a ready, untainted Node of
// another run on the cluster, as a run stopped while creating its Nodes
// could: the pods of the next run's Deployment, which says nothing of where
// they go, all land on that run's own Nodes.
func TestKwokRunPodsStayOnTheRunsNodes(t *testing.T) {
	kc := simtest.RequireKwok(t)
	admin, err := kubernetes.NewForConfig(kc.Config())
	require.NoError(t, err)
	ctx := context.Background()
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-isolate-left-behind-" + strconv.Itoa(os.Getpid()),
		Labels: map[string]string{world.LabelRun: "an-earlier-run"}}}
	_, err = admin.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admin.CoreV1().Nodes().Delete(context.Background(), other.Name, metav1.DeleteOptions{}))
	})
	require.Eventually(t, func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, other.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "kwok makes the left Node ready, so kube-scheduler could use it")

	_, env := kwokRun(t, "kwok-isolate-")
	d := placedDeployment(env.Namespace, "anywhere", 6)
	d.Spec.Template.Spec.NodeSelector, d.Spec.Template.Spec.Tolerations = nil, nil
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 6
	}, time.Minute, 100*time.Millisecond, "six pods ready")
	pods, err := env.Observer.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 6)
	for _, p := range pods.Items {
		assert.True(t, strings.HasPrefix(p.Spec.NodeName, env.Namespace+"-node-"), "%s on %q", p.Name, p.Spec.NodeName)
	}
}

// TestKwokAPIServerRestart restarts the kwokctl cluster's kube-apiserver
// under a running informer: its watch breaks and it watches again, and the
// pods kube-controller-manager creates after the restart (it reconnected
// too) reach its cache.
func TestKwokAPIServerRestart(t *testing.T) {
	_, env := kwokRun(t, "kwok-restart-")
	simtest.CheckAPIServerRestart(t, env, placedDeployment(env.Namespace, "after", 2))
}

// TestKwokCompaction compacts the kwokctl cluster's etcd: a read of etcd at
// a revision before the compaction fails.
func TestKwokCompaction(t *testing.T) {
	kc, env := kwokRun(t, "kwok-compact-")
	simtest.CheckCompaction(t, env, kc.EtcdURL())
}

// TestKwokStopLeavesNoProcess starts a cluster of its own and deletes it:
// while it runs, its processes are found by its folder; when Stop returns
// none is left, and the folder is gone.
func TestKwokStopLeavesNoProcess(t *testing.T) {
	simtest.RequireKwok(t) // the binaries are there
	kc, err := kwok.Start(context.Background(), kwok.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kc.Stop() })
	keepLogs(t, kc)
	running := clusterProcesses(kc.Workdir())
	assert.GreaterOrEqual(t, len(running), 5, "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok: %v", running)

	require.NoError(t, kc.Stop())
	require.NoError(t, kc.Stop(), "a second Stop is harmless")
	assert.Empty(t, clusterProcesses(kc.Workdir()))
	_, err = os.Stat(kc.Workdir())
	assert.ErrorIs(t, err, fs.ErrNotExist, "the cluster's folder is removed")
}

// helperEnv, set, makes TestHelperLeavesAKwokClusterRunning run.
const helperEnv = "CONVERGE_TEST_KWOK_LEAVES_A_CLUSTER"

// TestHelperLeavesAKwokClusterRunning is the child of
// TestNoKwokProcessOutlivesItsTestBinary: it starts a cluster, restarts its
// API server (a process converge starts itself, not kwokctl) and returns
// without deleting the cluster.
func TestHelperLeavesAKwokClusterRunning(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper of TestNoKwokProcessOutlivesItsTestBinary")
	}
	kc, err := kwok.Start(t.Context(), kwok.Options{})
	require.NoError(t, err)
	require.NoError(t, kc.RestartAPIServer(t.Context()))
	fmt.Printf("CLUSTER %s %d\n", kc.Workdir(), len(clusterProcesses(kc.Workdir())))
}

// TestNoKwokProcessOutlivesItsTestBinary runs a test binary whose test
// leaves a cluster running and returns: once the binary has exited, no
// process names the cluster's folder, and the folder is gone.
func TestNoKwokProcessOutlivesItsTestBinary(t *testing.T) {
	if _, _, err := kwok.Binaries(""); err != nil && !kwok.Required() {
		t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperLeavesAKwokClusterRunning$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?m)^CLUSTER (\S+) (\d+)$`).FindSubmatch(out)
	require.NotNil(t, m, "the child printed its cluster's folder:\n%s", out)
	dir := string(m[1])
	t.Cleanup(func() { // after a failure
		for _, p := range clusterProcesses(dir) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		_ = os.RemoveAll(dir)
	})
	n, err := strconv.Atoi(string(m[2]))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 5, "the child's cluster ran: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")

	var left []process
	assert.Eventually(t, func() bool { left = clusterProcesses(dir); return len(left) == 0 },
		2*time.Second, 20*time.Millisecond, "processes of the child's cluster left running")
	assert.Empty(t, left)
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the cluster's folder is removed")
}

// process is a process found by clusterProcesses.
type process struct {
	pid  int
	name string
}

// clusterProcesses lists the processes, other than this one, whose command
// line or environment (KWOK_WORKDIR) names the cluster folder dir.
func clusterProcesses(dir string) []process {
	var out []process
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range environs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		environ, _ := os.ReadFile(p)
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if bytes.Contains(cmdline, []byte(dir+"/")) || bytes.Contains(environ, []byte("KWOK_WORKDIR="+dir+"\x00")) {
			out = append(out, process{pid, filepath.Base(string(bytes.SplitN(cmdline, []byte{0}, 2)[0]))})
		}
	}
	return out
}

// keepLogs keeps the cluster's component logs in the test's artifacts
// (go test -artifacts -outputdir DIR) when the test fails, and shows the
// end of each. Call it after registering the cluster's Stop.
func keepLogs(t *testing.T, kc *kwok.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, err := kc.KeepLogs(t.ArtifactDir())
		if err != nil {
			t.Logf("keeping the kwok cluster's logs: %v", err)
			logs = kc.Logs()
		}
		t.Logf("the kwok cluster's logs end:\n%s", kwok.LogTail(logs, 20))
	})
}
