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
// process group. RestartAPIServer stops kube-apiserver and starts it again
// on the same port, certificates and etcd; CompactEtcd compacts etcd's
// history. The API server's watch cache answers recent resourceVersions
// after a compaction, as on a real cluster; a control plane started with
// Options.NoWatchCache lets etcd's 410 reach clients. The binaries are
// Linux-tested only.
package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/config"
	"github.com/converge-lab/converge/sim/internal/proc"
)

// ScalerUser is the identity the controller under test has: the scaler's
// ServiceAccount in config/, so config/'s bindings apply to it unchanged.
const ScalerUser = config.ScalerUser

// ControlPlane is a running kube-apiserver, etcd and kube-controller-manager.
type ControlPlane struct {
	env *crenvtest.Environment
	kcm *process
	dir string

	admin  *rest.Config
	scaler *rest.Config

	opts Options

	// Timings of the start, for benchmarks and logs.
	BootTime time.Duration

	mu        sync.Mutex
	apiserver *process // the kube-apiserver started by RestartAPIServer, if any

	stopOnce sync.Once
	stopErr  error
}

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

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	began := time.Now()
	assets, err := FindAssets()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "converge-envtest-")
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{dir: dir}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()

	apiserver, err := deathWrapper(dir, filepath.Join(assets, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	etcd, err := deathWrapper(dir, filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, err
	}
	cp.env = &crenvtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: crenvtest.ControlPlane{
			APIServer: &crenvtest.APIServer{Path: apiserver},
			Etcd:      &crenvtest.Etcd{Path: etcd},
		},
	}
	if opts.NoWatchCache {
		cp.env.ControlPlane.APIServer.Configure().Set("watch-cache", "false")
	}
	cp.opts = opts
	if cp.admin, err = cp.env.Start(); err != nil {
		return nil, fmt.Errorf("envtest: starting kube-apiserver and etcd: %w", err)
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
	cp.BootTime = time.Since(began)
	return cp, nil
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
	log, err := os.Create(filepath.Join(cp.dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cp.kcm, err = startProcess("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), []string{
		"--kubeconfig=" + path,
		"--controllers=deployment,replicaset,garbagecollector,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
	}, log)
	return err
}

// AdminConfig reaches the API server with full rights.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// ScalerConfig reaches the API server as the scaler's ServiceAccount.
func (cp *ControlPlane) ScalerConfig() *rest.Config { return rest.CopyConfig(cp.scaler) }

// Dir is the control plane's scratch folder (kubeconfigs, logs).
func (cp *ControlPlane) Dir() string { return cp.dir }

// ControllerManagerExited reports whether kube-controller-manager has died.
func (cp *ControlPlane) ControllerManagerExited() (bool, error) {
	if cp.kcm == nil {
		return true, errors.New("not started")
	}
	return cp.kcm.exited()
}

// RestartAPIServer stops kube-apiserver with SIGTERM and starts it again
// with the same flags: same port, certificates and etcd, so every client
// and kubeconfig stays valid. Watches break and clients reconnect. It
// returns once the new one answers /readyz.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	certDir := cp.env.ControlPlane.APIServer.CertDir
	var args []string
	if cp.apiserver != nil {
		args = cp.apiserver.cmd.Args
		if err := cp.apiserver.stop(10 * time.Second); err != nil {
			return fmt.Errorf("envtest: stopping kube-apiserver: %w", err)
		}
	} else {
		pid, cmdline, err := findProcess("--cert-dir=" + certDir)
		if err != nil {
			return fmt.Errorf("envtest: finding kube-apiserver: %w", err)
		}
		args = cmdline
		// With clients connected it can take long to drain: past a grace,
		// it is killed (and the restart is a crash-restart).
		if err := proc.Stop(ctx, pid, 5*time.Second); err != nil {
			return fmt.Errorf("envtest: stopping kube-apiserver: %w", err)
		}
	}
	log, err := os.OpenFile(filepath.Join(cp.dir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	p, err := startProcess("kube-apiserver", args[0], args[1:], log)
	if err != nil {
		return err
	}
	cp.apiserver = p
	client, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err == nil && string(body) == "ok" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("envtest: kube-apiserver not ready after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server
	}
}

// Stop stops kube-controller-manager, then the API server and etcd, and
// removes the scratch folder. It is safe to call twice.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		if cp.kcm != nil {
			errs = append(errs, cp.kcm.stop(10*time.Second))
		}
		cp.mu.Lock()
		if cp.apiserver != nil {
			errs = append(errs, cp.apiserver.stop(30*time.Second))
		}
		cp.mu.Unlock()
		if cp.env != nil && cp.admin != nil {
			errs = append(errs, cp.env.Stop())
		}
		errs = append(errs, os.RemoveAll(cp.dir))
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// AddUser provisions a user on the control plane (a client certificate),
// for tests that need a kubeconfig of their own.
func (cp *ControlPlane) AddUser(u crenvtest.User) (*crenvtest.AuthenticatedUser, error) {
	return cp.env.ControlPlane.AddUser(u, nil)
}
