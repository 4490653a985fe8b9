// Package kwok starts a real multi-component cluster without containers:
// kwokctl's binary runtime running etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, built from source by
// hack/assets.sh, and the kwok controller, which plays the Nodes' kubelets.
// kwok and kwokctl are built by hack/kwok.sh (`make assets`) at Version;
// nothing is downloaded.
//
// The cluster backend (sim/cluster) runs on it through its kubeconfig; a
// Cluster is also a sim.ControlPlane: RestartAPIServer stops kube-apiserver
// and starts it again with the flags kwokctl gave it (same port, etcd and
// certificates), and Compact compacts etcd's history.
//
// The kwok controller runs with the Stage resource enabled and one stage
// installed (stages/node-ready.yaml): a Node that is not Ready becomes
// Ready, and kwok holds and renews every Node's Lease. It does nothing to
// pods until a Stage says so; the world simulator plays what no Stage
// covers. Every component listens on 127.0.0.1 only.
// kube-controller-manager and kube-scheduler run without leader election
// (each is alone), so an API server restart of any length leaves them
// running, and Start returns once kube-controller-manager runs its
// controllers.
//
// How it differs from envtest, as a controller could tell:
//   - kube-scheduler binds pods (envtest has none; the world binds there),
//     so a pod is Pending, then bound with a Scheduled event, and an
//     unschedulable one gets a PodScheduled=False condition;
//   - kube-controller-manager runs its default controllers, node lifecycle
//     and pod GC included: a Node whose Lease is not renewed goes NotReady
//     and its pods are evicted, so kwok holds the Leases (the world does
//     not); envtest's runs the deployment, replicaset, garbagecollector and
//     namespace controllers only;
//   - it publishes kube-root-ca.crt into every namespace (a ConfigMap a
//     watch or list of ConfigMaps sees), which envtest's does not;
//   - the garbage collector and the namespace controller run in both, at
//     the same speed, so GC and namespace deletion match (the conformance
//     table in package sim runs on both and expects the same answers);
//   - the Nodes of a run are untainted (sim.KwokNodes), so runs on one
//     cluster go one at a time; kube-apiserver runs the PodNodeSelector
//     admission plugin, and IsolateRun makes the pods of a run's
//     namespace go to that run's Nodes only, so a Node an earlier run left
//     (or one kube-scheduler still has in its cache after its deletion)
//     takes none of them.
//
// A started cluster is supervised, as envtest's plane is (sim.Supervised):
// once a second it looks for each component's process, and one that is
// gone when nothing asked for it (a restart or Stop) is an Outage and is
// started again with kwokctl's arguments, its log appended to, up to three
// times; it has served once the API server answers or, for the others,
// once it has stayed up for 3 s. Past the attempts the cluster's Err names
// the component and quotes its log, and the cluster backend fails every
// run on it at once; it waits for a component being started again. A run
// during which one was down gets no verdict.
//
// Its ports are ones the kernel gave and Start released for kwokctl, so
// another process (any outgoing connection of the machine takes such a
// port) may bind one first: the component whose port it was then exits at
// once, and the API server never answers. While kwokctl creates the
// cluster, Start watches for that, gives the create up within a quarter
// second, and creates the cluster again on other ports (three tries); a
// presubmit run lost a cluster so, refused for two minutes, before it did.
//
// Processes are detached from the test binary: Stop deletes them, StopAll
// deletes those of every cluster the process has not stopped (simtest.Main
// calls it as a test binary returns), and Start deletes the clusters of
// processes that died without deleting theirs. A cluster's processes are
// found by its folder, which each names in its command line or
// environment. A process killed abruptly (SIGKILL, a panic) leaves its
// clusters running until the next Start on the machine.
package kwok

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/internal/proc"
)

// Version is the kwok release hack/kwok.sh builds.
const Version = "v0.8.0"

// ErrNoBinaries is returned when kwok, kwokctl or a control-plane binary is
// missing.
var ErrNoBinaries = errors.New("kwok binaries missing; run `make assets` (hack/assets.sh and hack/kwok.sh) to build them")

// DefaultBinDir is where hack/kwok.sh puts kwok and kwokctl:
// $CONVERGE_KWOK_DIR, else under the user's cache dir, keyed by version, os
// and arch.
func DefaultBinDir() (string, error) {
	if dir := os.Getenv("CONVERGE_KWOK_DIR"); dir != "" {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "converge", "kwok", fmt.Sprintf("%s-%s-%s", Version, runtime.GOOS, runtime.GOARCH)), nil
}

// Binaries locates every binary a cluster runs: kwok and kwokctl in binDir
// (empty means DefaultBinDir), the control plane where envtest finds it
// plus kube-scheduler. It fails with ErrNoBinaries, naming what is missing
// where.
func Binaries(binDir string) (kwokBin, assets string, err error) {
	if binDir == "" {
		if binDir, err = DefaultBinDir(); err != nil {
			return "", "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
	}
	if assets, err = envtest.FindAssets(); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
	}
	var missing []string
	for _, p := range []string{filepath.Join(binDir, "kwok"), filepath.Join(binDir, "kwokctl"), filepath.Join(assets, "kube-scheduler")} {
		if info, err := os.Stat(p); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "", "", fmt.Errorf("%w (%s)", ErrNoBinaries, strings.Join(missing, ", "))
	}
	return binDir, assets, nil
}

// Required reports whether a missing binary must fail tests rather than skip
// them: under CI=true, or CONVERGE_REQUIRE_KWOK=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("CONVERGE_REQUIRE_KWOK") == "1"
}

// Options configures a cluster.
type Options struct {
	// BinDir holds kwok and kwokctl. Empty means DefaultBinDir.
	BinDir string
	// Wait bounds the cluster's start. Zero means two minutes.
	Wait time.Duration
}

// Cluster is a running kwokctl cluster.
type Cluster struct {
	name, kwokctl, workdir string
	env                    []string
	etcdURL                string
	admin                  *rest.Config

	mu       sync.Mutex
	stopped  bool
	attached bool
	// Started is how long the cluster took to be ready.
	Started time.Duration
	// restarted names the components started again while it started.
	restarted []string

	// The supervisor (supervise.go): its stop and end, and what it saw.
	unwatch  context.CancelFunc
	watching chan struct{}
	smu      sync.Mutex
	outages  []sim.Outage
	changed  chan struct{}
	err      error
}

var _ sim.ControlPlane = (*Cluster)(nil)

// root holds a folder per cluster, named by the owning process's pid: Start
// deletes those whose process is gone.
func root() string { return filepath.Join(os.TempDir(), "converge-kwok") }

// Start creates a cluster and waits until its API server answers. Every
// control-plane component runs with its QPS limits lifted.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir, assets, err := Binaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.Wait <= 0 {
		opts.Wait = 2 * time.Minute
	}
	reapOrphans(ctx, filepath.Join(binDir, "kwokctl"))
	if err := os.MkdirAll(root(), 0o700); err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	version, err := exec.CommandContext(ctx, filepath.Join(assets, "kube-apiserver"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("kwok: kube-apiserver --version: %w", err)
	}
	fields := strings.Fields(string(version)) // "Kubernetes v1.37.2"
	if len(fields) == 0 {
		return nil, fmt.Errorf("kwok: kube-apiserver --version printed nothing")
	}
	begin := time.Now()
	var c *Cluster
	for attempt := 1; ; attempt++ {
		c, err = create(ctx, opts, binDir, assets, fields[len(fields)-1])
		var exited *exitedAtStart
		if err == nil || !errors.As(err, &exited) || !exited.portTaken || ctx.Err() != nil {
			break
		}
		if attempt == startAttempts {
			err = fmt.Errorf("%w\n(ports taken at each of %d attempts)", err, attempt)
			break
		}
		klog.Background().Info("kwok: a component's port was taken while the cluster was created; creating it again on other ports",
			"component", exited.component, "attempt", attempt)
	}
	if err != nil {
		return nil, err
	}
	if c.admin, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig()); err != nil {
		return nil, errors.Join(fmt.Errorf("kwok: %w", err), c.Stop())
	}
	if err := c.waitServed(ctx, opts.Wait); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if err := c.waitControllers(ctx, opts.Wait); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if err := c.installStages(ctx, opts.Wait); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	names, err := componentNames(filepath.Join(c.workdir, "clusters", c.name, "kwok.yaml"))
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	watch, unwatch := context.WithCancel(context.Background())
	c.unwatch, c.watching = unwatch, make(chan struct{})
	go c.supervise(watch, names, c.watching)
	live.add(c)
	c.Started = time.Since(begin)
	return c, nil
}

// startAttempts is how many times Start creates a cluster whose
// component found its port taken.
const startAttempts = 3

// exitedAtStart is a create given up because a component exited before
// the cluster was up. portTaken says its log blames its address being in
// use: one of the ports it was given was taken in between (freePorts
// releases them for kwokctl to use, and any process of the machine may
// bind one first, an outgoing connection included), which another create,
// on other ports, does not meet.
type exitedAtStart struct {
	component, log string
	portTaken      bool
}

func (e *exitedAtStart) Error() string {
	return fmt.Sprintf("kwok: %s exited while the cluster was created; the last lines of its log, deleted with the cluster:\n%s", e.component, e.log)
}

// pickPorts is freePorts; a test takes one already bound.
var pickPorts = freePorts

// create creates a cluster in a folder of its own, on ports free now, and
// returns once kwokctl has; a component that exits meanwhile ends the
// create at once with an *exitedAtStart (see exited), instead of at
// kwokctl's wait. On failure the cluster is deleted, and the error quotes
// the logs of etcd and the API server.
func create(ctx context.Context, opts Options, binDir, assets, kubeVersion string) (*Cluster, error) {
	workdir, err := os.MkdirTemp(root(), strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	// Every port a component listens on comes from the kernel, all held at
	// once so they differ: kwokctl's own choice walks down from 32767 in
	// each process, so two clusters created at once (tests in parallel
	// packages) pick the same ports, and one's clients reach the other's
	// API server.
	ports, err := pickPorts(6)
	if err != nil {
		_ = os.RemoveAll(workdir)
		return nil, fmt.Errorf("kwok: %w", err)
	}
	etcdPort := ports[0]
	c := &Cluster{
		name:    "converge-" + filepath.Base(workdir),
		kwokctl: filepath.Join(binDir, "kwokctl"),
		workdir: workdir,
		env:     append(os.Environ(), "KWOK_WORKDIR="+workdir, "KWOK_KUBE_VERSION="+kubeVersion),
		etcdURL: fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
	}
	// Options without a flag: every component listens on loopback only.
	// kube-controller-manager and kube-scheduler run without leader
	// election: each is alone, and with it either exits for good when the
	// API server is away longer than its renew deadline (10 s), as a
	// restart on a loaded machine can be, and nothing here restarts it.
	conf := filepath.Join(workdir, "kwokctl.yaml")
	err = os.WriteFile(conf, fmt.Appendf(nil, `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
  etcdPort: %d
  etcdPeerPort: %d
  kubeApiserverPort: %d
  kwokControllerPort: %d
  kubeControllerManagerPort: %d
  kubeSchedulerPort: %d
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - key: enable-admission-plugins
    value: PodNodeSelector
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
`, ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]), 0o600)
	if err != nil {
		_ = os.RemoveAll(workdir)
		return nil, fmt.Errorf("kwok: %w", err)
	}
	watchCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		// Polling other processes, until one has exited or the create ends.
		_ = wait.PollUntilContextCancel(watchCtx, 250*time.Millisecond, false, func(context.Context) (bool, error) {
			if e := c.exited(); e != nil {
				abort(e)
				return true, nil
			}
			return false, nil
		})
	}()
	_, err = c.run(watchCtx, opts.Wait+30*time.Second, "create", "cluster", "--runtime", "binary",
		"--etcd-binary", filepath.Join(assets, "etcd"),
		"--kube-apiserver-binary", filepath.Join(assets, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(assets, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(assets, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(binDir, "kwok"),
		"--etcd-port", strconv.Itoa(etcdPort),
		"--enable-crds", "Stage",
		"--disable-qps-limits",
		"--config", conf,
		"--kubeconfig", c.Kubeconfig(),
		"--wait", opts.Wait.String())
	cause := context.Cause(watchCtx)
	abort(nil)
	<-watched
	var exited *exitedAtStart
	if !errors.As(cause, &exited) {
		exited = c.exited() // in the watch's last quarter second
	}
	switch {
	case exited != nil:
		err = exited
	case err == nil:
		return c, nil
	default:
		err = fmt.Errorf("%w\n%s", err, LogTail(c.logsOf("etcd", "kube-apiserver"), 20))
	}
	if serr := c.Stop(); serr != nil {
		if exited != nil {
			exited.portTaken = false // a cluster not deleted is not created again beside it
		}
		return nil, errors.Join(err, fmt.Errorf("kwok: deleting the cluster: %w", serr))
	}
	return nil, err
}

// exited is the first component of a cluster being created whose process
// is gone, when it is etcd or the API server (the rest of the cluster
// cannot come up without them, and kwokctl would wait for the API server
// until its deadline) or one that exited because its port was taken; nil
// when there is none. A component whose port was taken exits at once.
func (c *Cluster) exited() *exitedAtStart {
	files, _ := filepath.Glob(filepath.Join(c.workdir, "clusters", c.name, "pids", "*.pid"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if c.running(name) {
			continue
		}
		tail := tailOf(c.logPath(name), 20)
		taken := strings.Contains(tail, "address already in use")
		if name == "etcd" || name == "kube-apiserver" || taken {
			return &exitedAtStart{component: name, log: tail, portTaken: taken}
		}
	}
	return nil
}

// Attach reaches a cluster another process started, from its Workdir: its
// API server can be restarted and its etcd compacted from here, but only
// its owner stops it (Stop does nothing on an attached cluster).
func Attach(workdir string) (*Cluster, error) {
	clusters, err := os.ReadDir(filepath.Join(workdir, "clusters"))
	if err != nil {
		return nil, fmt.Errorf("kwok: %s is not a cluster's folder: %w", workdir, err)
	}
	if len(clusters) != 1 {
		return nil, fmt.Errorf("kwok: %s holds %d clusters, want 1", workdir, len(clusters))
	}
	c := &Cluster{name: clusters[0].Name(), workdir: workdir, stopped: true, attached: true}
	etcd, err := readComponent(filepath.Join(workdir, "clusters", c.name, "kwok.yaml"), "etcd")
	if err != nil {
		return nil, err
	}
	for _, a := range etcd.Args {
		if url, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
			c.etcdURL = strings.Replace(strings.Split(url, ",")[0], "0.0.0.0", "127.0.0.1", 1)
		}
	}
	if c.etcdURL == "" {
		return nil, fmt.Errorf("kwok: no etcd client URL in %s's configuration", c.name)
	}
	if c.admin, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig()); err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	return c, nil
}

// Name is the cluster's kwokctl name.
func (c *Cluster) Name() string { return c.name }

// Kubeconfig is the path of an administrator kubeconfig for the cluster.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.workdir, "kubeconfig") }

// Workdir holds the cluster's configuration, pid files and logs (under
// clusters/NAME/logs).
func (c *Cluster) Workdir() string { return c.workdir }

// EtcdURL is etcd's client URL.
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// Config is a REST config with the kubeconfig's administrator rights.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.admin) }

// RestartAPIServer stops kube-apiserver with SIGTERM (SIGKILL after 5s of
// draining) and starts it again as kwokctl did: the same binary and flags
// from the cluster's kwok.yaml, so the port, certificates and etcd stay and
// every client and kubeconfig stays valid. The new process's pid goes where
// kwokctl keeps it, so Stop deletes it. It returns once the new one
// answers.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	return c.restartAPIServer(ctx, 0)
}

// restartAPIServer restarts kube-apiserver after it has been down for at
// least down.
func (c *Cluster) restartAPIServer(ctx context.Context, down time.Duration) error {
	if err := c.restart(ctx, "kube-apiserver", down); err != nil {
		return err
	}
	return c.waitServed(ctx, time.Minute)
}

// restart stops the named component of the cluster (if it still runs) and,
// after down, starts it again with the arguments kwokctl gave it, its log
// appended to.
func (c *Cluster) restart(ctx context.Context, name string, down time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped && !c.attached {
		return errors.New("kwok: cluster stopped")
	}
	dir := filepath.Join(c.workdir, "clusters", c.name)
	comp, err := readComponent(filepath.Join(dir, "kwok.yaml"), name)
	if err != nil {
		return err
	}
	pidFile := filepath.Join(comp.WorkDir, "pids", name+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("kwok: finding %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("kwok: %s: %w", pidFile, err)
	}
	// A pid file outlives its process, and the pid may be another
	// process's by now: only one that names the cluster's folder is its.
	if slices.Contains(processesOf(c.workdir), pid) {
		if err := proc.Stop(ctx, pid, 5*time.Second); err != nil {
			return fmt.Errorf("kwok: stopping %s: %w", name, err)
		}
	}
	select {
	case <-time.After(down): // the outage itself
	case <-ctx.Done():
		return ctx.Err()
	}
	log, err := os.OpenFile(filepath.Join(comp.WorkDir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(comp.Binary, comp.Args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = comp.WorkDir, log, log
	// Detached and marked with the cluster's folder, as kwokctl starts it.
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kwok: starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reaped when it exits; Stop kills it by its pid file
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("kwok: %w", err)
	}
	return nil
}

// component is what kwok.yaml says of one of the cluster's processes.
type component struct {
	Name    string   `json:"name"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	WorkDir string   `json:"workDir"`
}

// readComponent reads the named component of a kwokctl cluster's
// kwok.yaml.
func readComponent(file, name string) (component, error) {
	comps, err := readComponents(file)
	if err != nil {
		return component{}, err
	}
	for _, c := range comps {
		if c.Name == name && c.Binary != "" && c.WorkDir != "" {
			return c, nil
		}
	}
	return component{}, fmt.Errorf("kwok: %s names no %s", file, name)
}

// readComponents reads the components of a kwokctl cluster's kwok.yaml
// (its first document, a KwokctlConfiguration).
func readComponents(file string) ([]component, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n---")
	var conf struct {
		Components []component `json:"components"`
	}
	if err := yaml.Unmarshal([]byte(first), &conf); err != nil {
		return nil, fmt.Errorf("kwok: %s: %w", file, err)
	}
	return conf.Components, nil
}

// Compact compacts etcd's history up to its current revision.
func (c *Cluster) Compact(ctx context.Context) error {
	_, err := envtest.CompactEtcdAt(ctx, c.etcdURL)
	return err
}

// Stop deletes the cluster: every process it started, and its folder. When
// it returns, none of them is running. It is safe to call twice.
func (c *Cluster) Stop() error {
	c.stopSupervising()
	live.remove(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	pruneStalePIDs(c.workdir)
	_, err := c.run(context.Background(), 2*time.Minute, "delete", "cluster", "--kubeconfig", c.Kubeconfig())
	return errors.Join(err, remove(context.Background(), c.workdir))
}

// pruneStalePIDs removes the pid files of the cluster in workdir that name
// a process not of the cluster: kwokctl's delete SIGKILLs every pid its
// pid files name, unchecked, and the pid of a component that exited on its
// own may be another process's by then. On a machine whose pids wrap
// within minutes (pid_max 32768, a cold build forking compilers by the
// thousand), that was an unrelated process killed without a word: another
// test binary's kube-controller-manager, say.
func pruneStalePIDs(workdir string) {
	files, _ := filepath.Glob(filepath.Join(workdir, "clusters", "*", "pids", "*.pid"))
	if len(files) == 0 {
		return
	}
	ours := processesOf(workdir)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || perr != nil || !slices.Contains(ours, pid) {
			_ = os.Remove(f)
		}
	}
}

// StopAll deletes every cluster this process started and has not deleted
// (a Stop that never ran: a test that forgot it, a run that ended on an
// error), found by their folders. Call it as the process ends;
// simtest.Main does. It ends their supervision first: a supervisor still
// watching would take the kills for outages and start the components
// again, into the folder being removed.
func StopAll() error {
	for _, c := range live.take() {
		c.stopSupervising()
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
	}
	entries, err := os.ReadDir(root())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), strconv.Itoa(os.Getpid())+"-") {
			errs = append(errs, remove(context.Background(), filepath.Join(root(), e.Name())))
		}
	}
	return errors.Join(errs...)
}

// remove kills what is left of the cluster in workdir and removes the
// folder. kwokctl's delete kills only the processes its pid files name, and
// does not wait for them to exit; a process started while a create was
// cancelled has no pid file yet, and a cluster whose Stop never ran has not
// been deleted at all. Every process of a cluster names its folder, in its
// command line (certificates, kubeconfigs, data) or its environment
// (KWOK_WORKDIR, from kwokctl; restartAPIServer sets it too), which a pid
// file reused by another process would not.
func remove(ctx context.Context, workdir string) error {
	pids := processesOf(workdir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL) // kwokctl's delete kills them so too
	}
	var left []string
	for _, pid := range pids {
		if !proc.Gone(ctx, pid, 10*time.Second) {
			left = append(left, strconv.Itoa(pid))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("kwok: processes %s of the cluster in %s still running after SIGKILL", strings.Join(left, ", "), workdir)
	}
	if err := os.RemoveAll(workdir); err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	return nil
}

// processesOf lists the processes other than this one whose command line
// or environment names workdir.
func processesOf(workdir string) []int {
	inArgs := []byte(workdir + "/")
	inEnv := []byte("\x00KWOK_WORKDIR=" + workdir + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(cmdline, inArgs) || bytes.Contains(append([]byte{0}, environ...), inEnv) {
			out = append(out, pid)
		}
	}
	return out
}

// run runs kwokctl on this cluster and returns its output.
func (c *Cluster) run(ctx context.Context, limit time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kwokctl, append([]string{"--name", c.name}, args...)...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:min(2, len(args))], " "), err, tail(out, 4000))
	}
	return out, nil
}

// waitServed polls /readyz until it answers ok.
func (c *Cluster) waitServed(ctx context.Context, limit time.Duration) error {
	return c.poll(ctx, limit, "the API server is not ready", func(ctx context.Context, client kubernetes.Interface) error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// waitControllers waits until kube-controller-manager runs its
// controllers: its root CA publisher has written kube-root-ca.crt into the
// default namespace. Until then it is still waiting for the API server to
// be healthy, and exits if the server stays away (on a loaded machine, a
// slow start of the server is enough), which kwokctl does not mend: a
// controller manager found gone is started again, up to three times. A
// failure quotes the end of its log.
func (c *Cluster) waitControllers(ctx context.Context, limit time.Duration) error {
	err := c.poll(ctx, limit, "kube-controller-manager runs no controllers (no kube-root-ca.crt in the default namespace)",
		func(ctx context.Context, client kubernetes.Interface) error {
			_, err := client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if err == nil || len(c.restarted) >= 3 || c.running("kube-controller-manager") {
				return err
			}
			if rerr := c.restart(ctx, "kube-controller-manager", 0); rerr != nil {
				return errors.Join(err, rerr)
			}
			c.restarted = append(c.restarted, "kube-controller-manager")
			klog.Background().Info("kwok: kube-controller-manager exited before it ran its controllers; started it again", "cluster", c.name)
			return err
		})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, LogTail(c.logsOf("kube-controller-manager"), 20))
	}
	return nil
}

// logPath is the path of the named component's log.
func (c *Cluster) logPath(name string) string {
	return filepath.Join(c.workdir, "clusters", c.name, "logs", name+".log")
}

// running says whether the named component's process is alive: its pid
// file names a process of the cluster's folder.
func (c *Cluster) running(name string) bool {
	raw, err := os.ReadFile(filepath.Join(c.workdir, "clusters", c.name, "pids", name+".pid"))
	if err != nil {
		return true // not known: leave it be
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	return err != nil || ofCluster(pid, c.workdir)
}

// logsOf is the logs of the named components.
func (c *Cluster) logsOf(names ...string) []ComponentLog {
	var out []ComponentLog
	for _, l := range c.Logs() {
		if slices.Contains(names, l.Component) {
			out = append(out, l)
		}
	}
	return out
}

// poll calls try, each call bounded to 5 s, until it succeeds or limit
// has passed; what says what was still not so.
func (c *Cluster) poll(ctx context.Context, limit time.Duration, what string, try func(context.Context, kubernetes.Interface) error) error {
	client, err := kubernetes.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	deadline := time.Now().Add(limit)
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := try(reqCtx, client)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kwok: %s after %v: %w", what, limit, err)
		}
		time.Sleep(100 * time.Millisecond) // polling another process
	}
}

// reapOrphans deletes the clusters of processes that are gone: a test
// binary killed before its Stop leaves them running, detached.
func reapOrphans(ctx context.Context, kwokctl string) {
	entries, err := os.ReadDir(root())
	if err != nil {
		return
	}
	for _, e := range entries {
		owner, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(owner)
		if !ok || err != nil || !e.IsDir() || alive(pid) {
			continue
		}
		c := &Cluster{name: "converge-" + e.Name(), kwokctl: kwokctl, workdir: filepath.Join(root(), e.Name())}
		c.env = append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
		pruneStalePIDs(c.workdir)
		_, _ = c.run(ctx, time.Minute, "delete", "cluster", "--kubeconfig", c.Kubeconfig())
		_ = remove(ctx, c.workdir)
	}
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePorts are n distinct ports free on loopback now.
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
