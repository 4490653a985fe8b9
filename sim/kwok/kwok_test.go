package kwok

import (
	"context"
	"net"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/internal/proc"
	"github.com/converge-lab/converge/sim/simtest/tier"
	"github.com/converge-lab/converge/sim/world"
)

// TestVersionIsTheScripts: hack/kwok.sh builds the version this package
// looks for, or DefaultBinDir names a folder nothing fills.
func TestVersionIsTheScripts(t *testing.T) {
	raw, err := os.ReadFile("../../hack/kwok.sh")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^KWOK_VERSION=(\S+)`).FindSubmatch(raw)
	require.NotNil(t, m, "hack/kwok.sh sets KWOK_VERSION")
	assert.Equal(t, Version, string(m[1]))
}

func TestMissingBinariesAreNamed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	_, _, err := Binaries(dir)
	require.ErrorIs(t, err, ErrNoBinaries)
	assert.Contains(t, err.Error(), "kube-apiserver")

	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kwokctl"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, b), nil, 0o755))
	}
	_, _, err = Binaries(dir)
	require.ErrorIs(t, err, ErrNoBinaries)
	assert.Contains(t, err.Error(), filepath.Join(dir, "kwok")+",")
	assert.Contains(t, err.Error(), filepath.Join(dir, "kube-scheduler"))
	assert.NotContains(t, err.Error(), "kwokctl")
}

func TestReadComponent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kwok.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: config.kwok.x-k8s.io/v1alpha1
components:
- args: [--etcd-servers=http://127.0.0.1:1]
  binary: /x/etcd
  name: etcd
  workDir: /w
- args: [--secure-port=2, --etcd-servers=http://127.0.0.1:1]
  binary: /x/kube-apiserver
  name: kube-apiserver
  workDir: /w
kind: KwokctlConfiguration
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
`), 0o600))
	c, err := readComponent(file, "kube-apiserver")
	require.NoError(t, err)
	assert.Equal(t, component{Name: "kube-apiserver", Binary: "/x/kube-apiserver", Args: []string{"--secure-port=2", "--etcd-servers=http://127.0.0.1:1"}, WorkDir: "/w"}, c)
	_, err = readComponent(file, "kube-scheduler")
	assert.ErrorContains(t, err, "names no kube-scheduler")
	_, err = readComponent(filepath.Join(t.TempDir(), "missing"), "kube-apiserver")
	assert.Error(t, err)
}

// TestPodStagesMapTwoModels: ready-after-delay and never-ready become
// Stages for the namespace's bound pods, with the kubelet's final delete;
// the other models stay the world's.
func TestPodStagesMapTwoModels(t *testing.T) {
	stages, err := PodStages("ns-1", world.Model{Kind: world.ReadyAfterDelay, Delay: 2 * time.Second, Jitter: 3 * time.Second})
	require.NoError(t, err)
	require.Len(t, stages, 2)
	assert.Equal(t, "converge-ns-1-pod-ready", stages[0].GetName())
	delay, _, _ := unstructured.NestedMap(stages[0].Object, "spec", "delay")
	assert.Equal(t, map[string]any{"durationMilliseconds": int64(2000), "jitterDurationMilliseconds": int64(5000)}, delay)
	tmpl, _, _ := unstructured.NestedString(stages[0].Object, "spec", "next", "statusTemplate")
	assert.Contains(t, tmpl, "type: Ready\n  status: \"True\"")
	exprs, _, _ := unstructured.NestedSlice(stages[0].Object, "spec", "selector", "matchExpressions")
	assert.Contains(t, exprs, map[string]any{"key": ".metadata.namespace", "operator": "In", "values": []any{"ns-1"}})
	assert.Equal(t, "converge-ns-1-pod-delete", stages[1].GetName())
	del, _, _ := unstructured.NestedBool(stages[1].Object, "spec", "next", "delete")
	assert.True(t, del)

	stages, err = PodStages("ns-1", world.Model{Kind: world.NeverReady})
	require.NoError(t, err)
	tmpl, _, _ = unstructured.NestedString(stages[0].Object, "spec", "next", "statusTemplate")
	assert.Contains(t, tmpl, "type: Ready\n  status: \"False\"")

	for _, kind := range []string{world.FractionNever, world.Flapping, world.CapacityLimited, world.CrashLooping} {
		_, err := PodStages("ns-1", world.Model{Kind: kind, Period: time.Second})
		assert.ErrorContains(t, err, "has no kwok Stage", kind)
	}
}

// TestControllersOutliveAnAPIServerOutage keeps kube-apiserver down longer
// than a leader's renew deadline (10 s): kube-controller-manager and
// kube-scheduler are still running when it is back (with leader election
// they would have exited for good, and nothing restarts them), and
// kube-controller-manager still creates a Deployment's pods.
func TestControllersOutliveAnAPIServerOutage(t *testing.T) {
	tier.Full(t, "its own cluster and a 15 s outage (presubmit restarts the shared cluster's API server in sim/cluster)")
	if _, _, err := Binaries(""); err != nil && !Required() {
		t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Stop()) })
	t.Cleanup(func() { // before Stop deletes them
		if t.Failed() {
			logs, err := c.KeepLogs(t.ArtifactDir()) // kept with go test -artifacts
			if err != nil {
				t.Logf("keeping the cluster's logs: %v", err)
				logs = c.Logs()
			}
			t.Logf("the cluster's logs end:\n%s", LogTail(logs, 20))
		}
	})

	pids := filepath.Join(c.Workdir(), "clusters", c.Name(), "pids")
	alive := func(name string) bool {
		raw, err := os.ReadFile(filepath.Join(pids, name+".pid"))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		require.NoError(t, err)
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		i := strings.LastIndexByte(string(stat), ')')
		return err == nil && i >= 0 && len(stat) > i+2 && stat[i+2] != 'Z'
	}
	require.NoError(t, c.restartAPIServer(ctx, 15*time.Second))
	assert.True(t, alive("kube-controller-manager"), "kube-controller-manager outlived the outage")
	assert.True(t, alive("kube-scheduler"), "kube-scheduler outlived the outage")

	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	labels := map[string]string{"app": "after-outage"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "after-outage"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
	_, err = client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	// A reflector whose list or watch failed during the outage waits out
	// client-go's backoff before it lists again: up to 30 s, doubled by
	// its jitter, so an informer of kube-controller-manager's may learn of
	// the API server's return a minute after it (one did, in a loaded
	// run: the ReplicaSet 23 s after the Deployment, no pod a minute
	// after). Three minutes is that minute for the Deployments' informer
	// and for the ReplicaSets', one after the other, with a minute to
	// spare.
	assert.Eventually(t, func() bool {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=after-outage"})
		return err == nil && len(pods.Items) == 2
	}, 3*time.Minute, 100*time.Millisecond, "kube-controller-manager created the pods after the outage")
}

// TestStopAllKillsWhatNamesTheFolder: the processes of a cluster this
// process started and never stopped, found by the folder in their command
// line or their KWOK_WORKDIR, are gone when StopAll returns, and so is the
// folder; another process's cluster is left alone.
func TestStopAllKillsWhatNamesTheFolder(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // root()
	mine := filepath.Join(root(), strconv.Itoa(os.Getpid())+"-1")
	other := filepath.Join(root(), strconv.Itoa(os.Getpid())+"1-1") // another pid's, its name a prefix of ours
	for _, dir := range []string{mine, other} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "clusters"), 0o700))
	}
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	inFolder := filepath.Join(mine, "clusters", "sleep") // a command line naming the folder
	require.NoError(t, os.Symlink(sleep, inFolder))
	start := func(bin, env string) *exec.Cmd {
		cmd := exec.Command(bin, "60")
		cmd.Env = append(os.Environ(), env)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	byArgs := start(inFolder, "")
	byEnv := start(sleep, "KWOK_WORKDIR="+mine)
	others := start(sleep, "KWOK_WORKDIR="+other)
	require.ElementsMatch(t, []int{byArgs.Process.Pid, byEnv.Process.Pid}, processesOf(mine))

	require.NoError(t, StopAll())
	assert.Empty(t, processesOf(mine))
	assert.NoDirExists(t, mine)
	assert.Equal(t, []int{others.Process.Pid}, processesOf(other))
	assert.DirExists(t, other)
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{name: "c", workdir: dir}
	logs := filepath.Join(dir, "clusters", "c", "logs")
	require.NoError(t, os.MkdirAll(logs, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(logs, "etcd.log"), []byte("1\n2\n3\n4"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(logs, "kube-apiserver.log"), nil, 0o600))
	// Longer than what is read of a log: the line cut by the read is left out.
	big := strings.Repeat("x", 300<<10) + "\nlast\n"
	require.NoError(t, os.WriteFile(filepath.Join(logs, "kwok.log"), []byte(big), 0o600))

	got := c.Logs()
	require.Equal(t, []ComponentLog{
		{"etcd", filepath.Join(logs, "etcd.log")},
		{"kube-apiserver", filepath.Join(logs, "kube-apiserver.log")},
		{"kwok", filepath.Join(logs, "kwok.log")},
	}, got)
	kept, err := c.KeepLogs(filepath.Join(dir, "kept"))
	require.NoError(t, err)
	require.Len(t, kept, 3)
	assert.Equal(t, filepath.Join(dir, "kept", "etcd.log"), kept[0].Path)
	assert.FileExists(t, kept[2].Path)

	assert.Equal(t, "--- etcd, the last 2 lines of "+kept[0].Path+":\n3\n4\n"+
		"--- kube-apiserver, the last 2 lines of "+kept[1].Path+":\n"+
		"--- kwok, the last 2 lines of "+kept[2].Path+":\nlast\n", LogTail(kept, 2))
	assert.Contains(t, LogTail(got[:1], 10), ":\n1\n2\n3\n4\n", "fewer lines than asked: all of them")
	// An outage quotes lines, not bytes (it quoted the last 20 bytes).
	assert.Equal(t, "3\n4\n", tailOf(got[0].Path, 2))
	assert.Equal(t, "last\n", tailOf(got[2].Path, 1))
	assert.Empty(t, tailOf(filepath.Join(logs, "missing.log"), 2))
}

// kwokctl's delete SIGKILLs the pid each pid file names, unchecked. A
// component that exited on its own leaves a pid file whose pid another
// process may have taken since (pids wrap within minutes on a busy
// machine): Stop must not kill it. Here the unrelated process is a sleep
// whose pid replaces kube-scheduler's in its pid file.
func TestStopSparesWhatAStalePIDFileNames(t *testing.T) {
	if _, _, err := Binaries(""); err != nil && !Required() {
		t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
	}
	c, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	unrelated := exec.Command("sleep", "60")
	require.NoError(t, unrelated.Start())
	exited := make(chan error, 1)
	go func() { exited <- unrelated.Wait() }()
	t.Cleanup(func() { _ = unrelated.Process.Kill() })
	pidFile := filepath.Join(c.Workdir(), "clusters", c.Name(), "pids", "kube-scheduler.pid")
	require.FileExists(t, pidFile)
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(unrelated.Process.Pid)), 0o600))

	require.NoError(t, c.Stop())
	assert.Empty(t, processesOf(c.Workdir()), "the cluster's own processes are gone")
	select {
	case err := <-exited:
		t.Fatalf("the unrelated process the stale pid file named was killed: %v", err)
	default:
	}
	require.NoError(t, unrelated.Process.Signal(syscall.Signal(0)), "it still runs")
}

// TestAControllerManagerThatRunsNoControllersIsStartedAgain: a
// kube-controller-manager that exited before it ran its controllers (here:
// killed) is started again, and the wait ends when the new one publishes
// kube-root-ca.crt.
func TestAControllerManagerThatRunsNoControllersIsStartedAgain(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t)
	require.Empty(t, c.restarted)
	// The start's own restart is what is tested, not the supervisor's.
	c.stopSupervising()

	require.NoError(t, proc.Stop(ctx, pidOf(t, c, "kube-controller-manager"), 5*time.Second))
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().ConfigMaps("default").Delete(ctx, "kube-root-ca.crt", metav1.DeleteOptions{}))

	require.NoError(t, c.waitControllers(ctx, time.Minute))
	assert.Equal(t, []string{"kube-controller-manager"}, c.restarted)
}

// pidOf reads the pid file of the cluster's component name.
func pidOf(t *testing.T, c *Cluster, name string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.Workdir(), "clusters", c.Name(), "pids", name+".pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	return pid
}

// awaitOutages waits, up to limit, until done says the cluster's outages
// and error are as the test wants, and returns them.
func awaitOutages(t *testing.T, c *Cluster, limit time.Duration, done func([]sim.Outage, error) bool) ([]sim.Outage, error) {
	t.Helper()
	timeout := time.After(limit)
	for {
		outages, next := c.Outages()
		if err := c.Err(); done(outages, err) {
			return outages, err
		}
		select {
		case <-next:
		case <-timeout:
			outages, _ := c.Outages()
			t.Fatalf("after %v the outages are %v and the error %v", limit, outages, c.Err())
		}
	}
}

// TestAComponentThatExitsIsStartedAgain: a component of the cluster killed
// while it serves is an outage, started again with its flags; killing
// kube-controller-manager, then etcd, then the kwok controller leaves a
// cluster that serves.
func TestAComponentThatExitsIsStartedAgain(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t)
	outages, _ := c.Outages()
	require.Empty(t, outages)

	for i, name := range []string{"kube-controller-manager", "etcd", "kwok-controller"} {
		old := pidOf(t, c, name)
		require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
		outages, err := awaitOutages(t, c, 2*time.Minute, func(o []sim.Outage, err error) bool {
			return err != nil || len(o) > i && !o[i].Restarted.IsZero()
		})
		require.NoError(t, err)
		require.Len(t, outages, i+1)
		assert.Equal(t, name, outages[i].Component)
		assert.Contains(t, outages[i].String(), name+" exited (its process is gone)")
		assert.Contains(t, outages[i].Log, name+".log")
		assert.NotEqual(t, old, pidOf(t, c, name), "a new process")
	}
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after-the-outages"}}, metav1.CreateOptions{})
	require.NoError(t, err, "the restarted etcd stores what the API server writes")
	assert.True(t, c.running("kube-controller-manager"))
}

// TestAComponentThatCannotStartAgainBreaksTheCluster: a component whose
// restarts all exit at once makes the cluster's error, which names it and
// quotes its log; Stop still deletes the cluster.
func TestAComponentThatCannotStartAgainBreaksTheCluster(t *testing.T) {
	falseBin, err := exec.LookPath("false")
	require.NoError(t, err)
	c := startCluster(t)

	// What kube-scheduler starts as from now on exits at once.
	conf := filepath.Join(c.Workdir(), "clusters", c.Name(), "kwok.yaml")
	comp, err := readComponent(conf, "kube-scheduler")
	require.NoError(t, err)
	raw, err := os.ReadFile(conf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(conf, []byte(strings.ReplaceAll(string(raw), comp.Binary, falseBin)), 0o600))

	require.NoError(t, syscall.Kill(pidOf(t, c, "kube-scheduler"), syscall.SIGKILL))
	_, err = awaitOutages(t, c, 2*time.Minute, func(_ []sim.Outage, err error) bool { return err != nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the kwok cluster's kube-scheduler exited and could not be started again (3 attempts")
	assert.Contains(t, err.Error(), "kube-scheduler.log")
}

// startCluster starts a cluster the test stops; without the binaries it
// skips, or fails under CI.
func startCluster(t *testing.T) *Cluster {
	t.Helper()
	if _, _, err := Binaries(""); err != nil && !Required() {
		t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
	}
	c, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Stop()) })
	return c
}

// TestStopAllEndsTheSupervisionFirst: StopAll, as a test binary returns
// with a cluster it never stopped, ends the cluster's supervisor before it
// kills the processes, so that none is taken for an outage and started
// again into the folder being removed (etcd was, 2 s after such a binary
// had exited, on a loaded machine).
func TestStopAllEndsTheSupervisionFirst(t *testing.T) {
	c := startCluster(t)
	require.NoError(t, StopAll())
	select {
	case <-c.watching:
	default:
		t.Fatal("the cluster is still supervised after StopAll")
	}
	outages, _ := c.Outages()
	assert.Empty(t, outages, "StopAll's kills are no outage")
	assert.Empty(t, processesOf(c.Workdir()))
	assert.NoDirExists(t, c.Workdir())
	require.NoError(t, c.Stop(), "a Stop after StopAll is harmless")
}

// TestACreateWhosePortWasTakenIsMadeAgain: a port that freePorts gave
// and another process bound before the component did (freePorts releases
// them for kwokctl) makes that component exit at once. Start notices it
// while kwokctl still waits, and creates the cluster again on other ports,
// where it serves. Presubmit takes the API server's port, the full tier
// etcd's too.
func TestACreateWhosePortWasTakenIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		component string
		port      int // its index in what pickPorts returns
		full      bool
	}{
		{"kube-apiserver", 2, false},
		{"etcd", 0, true},
	} {
		t.Run(tc.component, func(t *testing.T) {
			if tc.full {
				tier.Full(t, "a second cluster of its own; presubmit takes the API server's port")
			}
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer taken.Close()
			var picks [][]int
			pickPorts = func(n int) ([]int, error) {
				ports, err := freePorts(n)
				if err == nil && len(picks) == 0 {
					ports[tc.port] = taken.Addr().(*net.TCPAddr).Port
				}
				picks = append(picks, ports)
				return ports, err
			}
			t.Cleanup(func() { pickPorts = freePorts })

			c := startCluster(t)
			require.Len(t, picks, 2, "the cluster was created again, once")
			assert.Equal(t, "https://127.0.0.1:"+strconv.Itoa(picks[1][2]), c.Config().Host)
			client, err := kubernetes.NewForConfig(c.Config())
			require.NoError(t, err)
			_, err = client.CoreV1().Namespaces().Create(context.Background(),
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "on-other-ports"}}, metav1.CreateOptions{})
			require.NoError(t, err, "the cluster made again serves")
		})
	}
}
