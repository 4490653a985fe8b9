// Package envtest is the real-control-plane backend: kube-apiserver and etcd
// started through controller-runtime's envtest, plus a kube-controller-manager
// process running the deployment, replicaset, garbagecollector and namespace
// controllers. Nothing schedules or runs pods: the world simulator plays the
// scheduler and the kubelet on simulated Nodes.
//
// One ControlPlane is shared by every run of a test binary (Shared, stopped
// by Main); each run gets a fresh namespace from a Backend. The controller
// under test reaches the API server as the scaler's ServiceAccount, bound by
// the very RBAC manifests in config/, never as an administrator.
//
// The binaries come from `make assets` (hack/assets.sh), found through
// $KUBEBUILDER_ASSETS or DefaultAssetsDir. Every process dies with the test
// binary, even on a panic, a timeout or SIGKILL: the API server and etcd run
// under setpriv --pdeathsig, the controller manager with Pdeathsig in its own
// process group, all forked from one thread that lives as long as the
// process (package spawn: a parent-death signal follows the thread that
// forked, and a controller under test may end threads). RestartAPIServer
// stops kube-apiserver and starts it again on the same port, certificates
// and etcd; CompactEtcd compacts etcd's history. Both act on a ready plane
// (WaitReady), and RestartAPIServer returns once it is ready again; the
// plane settles after a restart even when the run that asked for it ended
// first (it would otherwise stay unready, and every later run wait for it
// in vain), and one not ready within three times 30 s is broken. The API
// server's watch cache answers recent resourceVersions after a compaction,
// as on a real cluster; a control plane started with Options.NoWatchCache
// lets etcd's 410 reach clients. The binaries are Linux-tested only.
//
// # Supervision
//
// The plane watches its three processes. One that exits when nothing asked
// it to is an outage (sim.Outage: how it ended, its log's last lines, the
// path of the whole): it is started again with the same command line, its
// log appended to, and the plane is ready again once the API server answers
// and kube-controller-manager is seen running its controllers (a probe: its
// deployment controller syncs a new Deployment). A run
// during which one was down gets no verdict (scenarios' harness error); the
// next run's history says how it ended. A component that cannot be started
// again (three tries) breaks the plane: every run on it then fails at once,
// naming it and quoting its log, and a namespace's deletion stops waiting.
// A plane with an outage keeps its folder and logs when it stops.
//
// What killed kube-controller-manager, silently, in the middle of a test
// binary's tests on a fresh, loaded machine: no message in its log, so a
// SIGKILL, not an exit of its own (a failed start check logs "Error
// building controller context" and exits 1). Of the candidates, a thread
// ending under it (Pdeathsig) cannot happen in this repository's test
// binaries, none of whose packages ends a locked thread (only the runtime's
// signal thread is locked, for ever), though a user's controller may, hence
// the spawner. What can: kwokctl's delete SIGKILLs whatever pid each of a
// cluster's pid files names, unchecked, and a pid file outlives a
// component that exited, as it does a test binary killed with its
// cluster's folder left in /tmp (the next kwok.Start deletes such clusters).
// These machines have pid_max 32768 and a cold build forks compilers by the
// thousand, so pids wrap within minutes and a stale pid file names another
// process: here another test binary's kube-controller-manager. sim/kwok now
// prunes pid files that name a process not of the cluster before kwokctl
// deletes it (TestStopSparesWhatAStalePIDFileNames fails without that), and
// whatever else still kills a component is an outage the supervisor
// restarts and names.
package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/config"
	"github.com/converge-lab/converge/internal/spawn"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/sim"
)

// ScalerUser is the identity the controller under test has: the scaler's
// ServiceAccount in config/, so config/'s bindings apply to it unchanged.
const ScalerUser = config.ScalerUser

// ControlPlane is a running kube-apiserver, etcd and kube-controller-manager.
type ControlPlane struct {
	env *crenvtest.Environment
	dir string

	admin  *rest.Config
	scaler *rest.Config

	opts Options

	// Timings of the start, for benchmarks and logs.
	BootTime time.Duration

	// The supervised processes.
	etcd, apiserver, kcm *component

	// restartMu: one restart at a time, asked for (RestartAPIServer) or
	// not (an outage's recovery).
	restartMu sync.Mutex

	// smu guards the plane's state below.
	smu      sync.Mutex
	outages  []sim.Outage
	down     int  // components down now
	ready    bool // see WaitReady
	err      error
	changed  chan struct{} // closed and replaced at every change
	stopping bool
	// healthy ends, with the plane's error as its cause, when the plane
	// breaks: waits on its controllers (a namespace's deletion) end then.
	healthy context.Context
	broken  context.CancelCauseFunc

	stopOnce sync.Once
	stopErr  error
}

var (
	_ sim.Supervised = (*ControlPlane)(nil)
	_ sim.Logged     = (*ControlPlane)(nil)
)

// Options change how a control plane starts. The zero value is a control
// plane like a real cluster's.
type Options struct {
	// NoWatchCache starts kube-apiserver with --watch-cache=false: lists and
	// watches are served by etcd itself, so a compaction of etcd reaches
	// clients as the 410 a watch from a compacted resourceVersion gets.
	// With the cache (as on real clusters) the cache answers them.
	NoWatchCache bool
}

// StartControlPlane starts a control plane from the binaries FindAssets
// finds.
func StartControlPlane(ctx context.Context) (cp *ControlPlane, err error) {
	return StartControlPlaneWith(ctx, Options{})
}

// StartControlPlaneWith is StartControlPlane with options. It returns once
// kube-controller-manager runs its controllers (see WaitReady).
//
// The ports envtest gives etcd and the API server are ones the kernel
// handed out and envtest released for them, so another process (an
// outgoing connection takes such a port) may bind one first; the component
// then exits at once, its log saying that its address is in use. Such a
// start is made again, on other ports and in a new folder, up to
// startAttempts times.
func StartControlPlaneWith(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	began := time.Now()
	for attempt := 1; ; attempt++ {
		cp, err = startPlane(ctx, opts, attempt)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == startAttempts || ctx.Err() != nil {
			break
		}
		klog.Background().Info("envtest: a component's port was taken while the plane started; starting it again on other ports", "attempt", attempt)
	}
	if err != nil {
		return nil, err
	}
	cp.BootTime = time.Since(began)
	return cp, nil
}

// startAttempts is how many times StartControlPlaneWith starts a plane
// whose component found its port taken.
const startAttempts = 3

// errPortTaken marks a start that failed because a component's address
// was in use, as its log says.
var errPortTaken = errors.New("a component's port was taken")

// apiserverPort is the API server's port for a start's attempt; 0 lets
// envtest choose one. A test takes one already bound.
var apiserverPort = func(attempt int) int { return 0 }

// startPlane starts a control plane, once.
func startPlane(ctx context.Context, opts Options, attempt int) (cp *ControlPlane, err error) {
	assets, err := FindAssets()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "converge-envtest-")
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{dir: dir, opts: opts, changed: make(chan struct{})}
	cp.healthy, cp.broken = context.WithCancelCause(context.Background())
	// The plane as started, for the deferred clean-up: a failed start
	// returns a nil cp, which the deferred function would see.
	plane := cp
	defer func() {
		if err != nil {
			tails := plane.LogTails(tailLines)
			if strings.Contains(tails, "address already in use") {
				err = fmt.Errorf("%w (%w)", err, errPortTaken)
			}
			err = fmt.Errorf("%w\n%s", err, tails)
			_ = plane.Stop()
		}
	}()
	cp.etcd = &component{cp: cp, name: "etcd", log: filepath.Join(dir, "etcd.log"), ready: cp.etcdHealthy}
	cp.apiserver = &component{cp: cp, name: "kube-apiserver", log: filepath.Join(dir, "kube-apiserver.log"), ready: cp.apiserverReady}
	cp.kcm = &component{cp: cp, name: "kube-controller-manager", log: filepath.Join(dir, "kube-controller-manager.log"), ready: cp.probe}

	apiserver, err := deathWrapper(dir, filepath.Join(assets, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	etcd, err := deathWrapper(dir, filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, err
	}
	etcdLog, err := os.Create(cp.etcd.log)
	if err != nil {
		return nil, err
	}
	defer etcdLog.Close()
	apiserverLog, err := os.Create(cp.apiserver.log)
	if err != nil {
		return nil, err
	}
	defer apiserverLog.Close()
	cp.env = &crenvtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: crenvtest.ControlPlane{
			APIServer: &crenvtest.APIServer{Path: apiserver, Out: apiserverLog, Err: apiserverLog},
			Etcd:      &crenvtest.Etcd{Path: etcd, Out: etcdLog, Err: etcdLog},
		},
	}
	if port := apiserverPort(attempt); port != 0 {
		cp.env.ControlPlane.APIServer.SecureServing.Address = "127.0.0.1"
		cp.env.ControlPlane.APIServer.SecureServing.Port = strconv.Itoa(port)
	}
	if opts.NoWatchCache {
		cp.env.ControlPlane.APIServer.Configure().Set("watch-cache", "false")
	}
	// envtest forks from the calling thread: from the spawner's, so that
	// their parent-death signal follows the process (see package spawn).
	if err := spawn.Do(func() (err error) { cp.admin, err = cp.env.Start(); return err }); err != nil {
		return nil, fmt.Errorf("envtest: starting kube-apiserver and etcd: %w", err)
	}
	if err := cp.adopt(); err != nil {
		return nil, err
	}
	if err := cp.installScalerRBAC(ctx); err != nil {
		return nil, err
	}
	scaler, err := cp.env.ControlPlane.AddUser(crenvtest.User{
		Name:   ScalerUser,
		Groups: config.ScalerGroups,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("envtest: scaler user: %w", err)
	}
	cp.scaler = scaler.Config()
	if err := cp.startControllerManager(assets); err != nil {
		return nil, err
	}
	if err := cp.settle(ctx); err != nil {
		return nil, fmt.Errorf("envtest: the control plane is not ready: %w", err)
	}
	return cp, nil
}

// adopt watches the etcd and kube-apiserver envtest started, found by the
// folders their command lines name.
func (cp *ControlPlane) adopt() error {
	for _, a := range []struct {
		c      *component
		marker string
	}{
		{cp.etcd, "--data-dir=" + cp.env.ControlPlane.Etcd.DataDir},
		{cp.apiserver, "--cert-dir=" + cp.env.ControlPlane.APIServer.CertDir},
	} {
		pid, args, err := findProcess(a.marker)
		if err != nil {
			return fmt.Errorf("envtest: finding %s: %w", a.c.name, err)
		}
		a.c.adopt(pid, args)
	}
	return nil
}

// installScalerRBAC applies config/'s Namespace, ServiceAccount, roles and
// bindings (not its Deployment: the scaler runs in-process or through the
// fault proxy).
func (cp *ControlPlane) installScalerRBAC(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	if err := config.ApplyRBAC(ctx, client); err != nil {
		return fmt.Errorf("envtest: %w", err)
	}
	return nil
}

func (cp *ControlPlane) startControllerManager(assets string) error {
	kcmUser, err := cp.env.ControlPlane.AddUser(crenvtest.User{Name: "converge-kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("envtest: controller manager user: %w", err)
	}
	kubeconfig, err := kcmUser.KubeConfig()
	if err != nil {
		return err
	}
	path := filepath.Join(cp.dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	cp.kcm.args = []string{
		filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig=" + path,
		"--controllers=deployment,replicaset,garbagecollector,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
	}
	return cp.kcm.start()
}

// AdminConfig reaches the API server with full rights.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// ScalerConfig reaches the API server as the scaler's ServiceAccount.
func (cp *ControlPlane) ScalerConfig() *rest.Config { return rest.CopyConfig(cp.scaler) }

// Dir is the control plane's scratch folder (kubeconfigs, logs).
func (cp *ControlPlane) Dir() string { return cp.dir }

// ControllerManagerExited reports whether kube-controller-manager has
// exited and not been started again, and how it exited.
func (cp *ControlPlane) ControllerManagerExited() (bool, error) {
	if cp.kcm == nil {
		return true, errors.New("not started")
	}
	cp.kcm.mu.Lock()
	r := cp.kcm.cur
	cp.kcm.mu.Unlock()
	if r == nil {
		return true, errors.New("not started")
	}
	select {
	case <-r.done:
		return true, errors.New(r.exit)
	default:
		return false, nil
	}
}

// RestartAPIServer waits until the plane is ready (WaitReady), stops
// kube-apiserver with SIGTERM (SIGKILL after 5 s of draining: with clients
// connected it can take long) and starts it again with the same flags:
// same port, certificates and etcd, so every client and kubeconfig stays
// valid. Watches break and clients reconnect. It returns once the new one
// answers /readyz and kube-controller-manager runs its controllers again.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.WaitReady(ctx); err != nil {
		return err
	}
	cp.restartMu.Lock()
	cp.unready()
	if err := cp.apiserver.stop(5 * time.Second); err != nil {
		cp.restartMu.Unlock()
		return fmt.Errorf("envtest: stopping kube-apiserver: %w", err)
	}
	if err := cp.apiserver.start(); err != nil {
		cp.restartMu.Unlock()
		cp.breakDown(fmt.Errorf("envtest: kube-apiserver could not be started again: %w", err))
		return err
	}
	// The plane settles whether or not the run that asked for the
	// restart is still there to wait for it: a run that ended meanwhile
	// must not leave it unready for the next one to wait on in vain.
	settled := make(chan error, 1)
	go func() {
		defer cp.restartMu.Unlock()
		settled <- cp.settleAfter(context.WithoutCancel(ctx), cp.apiserver)
	}()
	select {
	case err := <-settled:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// settleAfter waits for the plane to be ready after restarting c, as
// settle does, up to restartAttempts times restartReady (a loaded machine
// can take that long); past them the plane is broken, and every run on it
// fails at once, naming the component that was not ready and its log.
func (cp *ControlPlane) settleAfter(ctx context.Context, c *component) error {
	var err error
	for range restartAttempts {
		if cp.isStopping() {
			return nil
		}
		if err = cp.settle(ctx); err == nil {
			return nil
		}
	}
	if cp.isStopping() {
		return nil
	}
	late := cp.kcm
	if strings.HasPrefix(err.Error(), cp.apiserver.name+":") {
		late = cp.apiserver
	}
	err = fmt.Errorf("the control plane was not ready within %v of %s's restart: %w; the last lines of %s's log:\n%s\n(its whole log: %s)",
		restartAttempts*restartReady, c.name, err, late.name, text.Indent(tail(late.log, tailLines), "    "), late.log)
	cp.breakDown(err)
	return err
}

// apiserverReady answers once kube-apiserver's /readyz says ok.
func (cp *ControlPlane) apiserverReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz: %s", body)
	}
	return nil
}

// probeNamespace holds the probes' Deployments.
const probeNamespace = "converge-probe"

// probe answers once kube-controller-manager runs its controllers: a
// Deployment gets its ReplicaSet, which takes the deployment controller
// with its informers synced (started with the others, the namespace
// controller and the garbage collector among them). The Deployment is then
// deleted, its ReplicaSet left to the garbage collector, unwaited for: a
// namespace's deletion would prove more and cost seconds per probe.
func (cp *ControlPlane) probe(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("probe: %w", err)
	}
	labels := map[string]string{"app": "probe"}
	deployments := client.AppsV1().Deployments(probeNamespace)
	d, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.invalid/probe:never-pulled"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer func() {
		_ = deployments.Delete(context.WithoutCancel(ctx), d.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration >= d.Generation, nil
	})
	if err != nil {
		return errors.New("probe: a Deployment was not seen by the deployment controller")
	}
	return nil
}

// etcdHealthy answers once etcd's /health says it is.
func (cp *ControlPlane) etcdHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.EtcdURL()+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}

// Stop stops kube-controller-manager, then the API server and etcd, and
// removes the scratch folder, unless a component had an outage: its logs
// then stay (Main says where). It is safe to call twice.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		stopped := errors.New("the control plane has stopped")
		cp.smu.Lock()
		cp.stopping = true
		outages := len(cp.outages)
		if cp.err == nil {
			cp.err = stopped // whoever waits for it to be ready
		}
		cp.changedLocked()
		cp.smu.Unlock()
		cp.broken(stopped) // and whoever waits on its controllers
		var errs []error
		// The controller manager first, then the API server, then etcd.
		// Those envtest started and still runs, it stops itself (it reaps
		// them: a signal of ours would race its bookkeeping).
		stop := func(c *component) {
			if c != nil && !c.release() {
				errs = append(errs, c.stop(30*time.Second))
			}
		}
		stop(cp.kcm)
		stop(cp.apiserver)
		// Also after a failed start: envtest stops only etcd then, and
		// the API server's certificates would stay in the temporary
		// folder, a set for each start made again.
		if cp.env != nil {
			errs = append(errs, cp.env.Stop())
		}
		stop(cp.etcd)
		if outages == 0 {
			errs = append(errs, os.RemoveAll(cp.dir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// AddUser provisions a user on the control plane (a client certificate),
// for tests that need a kubeconfig of their own.
func (cp *ControlPlane) AddUser(u crenvtest.User) (*crenvtest.AuthenticatedUser, error) {
	return cp.env.ControlPlane.AddUser(u, nil)
}
