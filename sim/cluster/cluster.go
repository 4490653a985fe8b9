// Package cluster is the backend for any cluster a kubeconfig reaches: kind
// or a real one. A run gets a fresh namespace, deleted afterwards. The
// cluster's own controllers and scheduler do their part; the world simulator
// only plays the kubelet of its own simulated Nodes (run it with
// KeepNodesAlive, and put scenario pods there with world.Placement), so no
// image is ever pulled.
//
// The controller under test reaches the API server by impersonating the
// scaler's ServiceAccount after config/'s RBAC is applied, so its rights are
// those of the manifests, not of the kubeconfig's user (who needs the
// impersonate verb). Limits: no virtual time; no API server restart or etcd
// compaction unless Config.ControlPlane gives the means (a kwokctl cluster
// started by sim/kwok does).
//
// On a kwokctl cluster (sim/kwok) the real kube-scheduler binds pods and
// the kwok controller renews the Nodes' Leases; how it differs from envtest
// is in sim/kwok's package doc.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-lab/converge/config"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/kwok"
)

// Config configures the cluster backend.
type Config struct {
	// Kubeconfig is the kubeconfig's path. Empty means $KUBECONFIG, then
	// ~/.kube/config.
	Kubeconfig string
	// Context in the kubeconfig. Empty means its current context.
	Context string
	// NamespacePrefix names the run's namespace. Empty means "converge-".
	NamespacePrefix string
	// Timeout bounds the reachability check at Start. Zero means 10s.
	Timeout time.Duration
	// CRDPaths are CustomResourceDefinition files or folders, installed
	// (or updated) and established at Start; left installed at Stop, since
	// other runs may use them (see sim.ReadCRDs).
	CRDPaths []string
	// Controller is the controller's identity and RBAC, applied in the
	// run's namespace; ControllerConfig then impersonates it. Zero means
	// the scaler's ServiceAccount and config/'s RBAC.
	Controller sim.Identity
	// ControlPlane restarts the API server and compacts etcd, where the
	// cluster is the harness's own (a *kwok.Cluster); nil means the backend
	// has neither capability.
	ControlPlane sim.ControlPlane
	// Kwok says the cluster is a kwokctl cluster of the harness's own
	// (sim/kwok): Env.Can then has sim.KwokNodes.
	Kwok bool
}

// Backend is the cluster backend.
type Backend struct {
	cfg  Config
	crds []*apiextensionsv1.CustomResourceDefinition
	rbac []runtime.Object

	mu       sync.Mutex
	ns       string
	observer kubernetes.Interface
}

var _ sim.Backend = (*Backend)(nil)

// New returns a backend; it reads its CRD files, and nothing else yet.
func New(cfg Config) (*Backend, error) {
	if cfg.NamespacePrefix == "" {
		cfg.NamespacePrefix = "converge-"
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("cluster backend: timeout must not be negative, got %v", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	crds, err := sim.ReadCRDs(cfg.CRDPaths...)
	if err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	rbac, err := cfg.Controller.Validate()
	if err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	return &Backend{cfg: cfg, crds: crds, rbac: rbac}, nil
}

// Name is the cluster kind's name.
const Name = "cluster"

// Name is the cluster kind's name.
func (b *Backend) Name() string { return Name }

// Start loads the kubeconfig, checks the API server answers, applies
// config/'s RBAC, installs the CRDs and creates the run's namespace.
func (b *Backend) Start(ctx context.Context) (*sim.Env, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ns != "" {
		return nil, errors.New("cluster backend: already started")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = b.cfg.Kubeconfig
	admin, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: b.cfg.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster backend: loading kubeconfig: %w", err)
	}
	observer, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	if sup, ok := b.cfg.ControlPlane.(sim.Supervised); ok {
		if err := awaitUp(ctx, sup, upWait); err != nil {
			return nil, fmt.Errorf("cluster backend: %w", err)
		}
	}
	checkCtx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	if _, err := observer.Discovery().RESTClient().Get().AbsPath("/version").Do(checkCtx).Raw(); err != nil {
		return nil, fmt.Errorf("cluster backend: cannot reach the API server at %s: %w", admin.Host, err)
	}
	if err := config.ApplyRBAC(ctx, observer); err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	if err := sim.InstallCRDs(ctx, admin, 0, b.crds...); err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	ns, err := sim.CreateRunNamespace(ctx, observer, b.cfg.NamespacePrefix)
	if err != nil {
		return nil, fmt.Errorf("cluster backend: %w", err)
	}
	b.ns, b.observer = ns, observer
	if b.cfg.Kwok {
		if err := kwok.IsolateRun(ctx, observer, ns); err != nil {
			return nil, fmt.Errorf("cluster backend: %w", err)
		}
	}

	scaler := rest.CopyConfig(admin)
	scaler.Impersonate = rest.ImpersonationConfig{UserName: config.ScalerUser, Groups: config.ScalerGroups}
	if id := b.cfg.Controller; !id.IsZero() {
		if err := id.ApplyRBAC(ctx, observer, ns, b.rbac); err != nil {
			return nil, fmt.Errorf("cluster backend: %w", err)
		}
		if err := id.WaitEffective(ctx, observer, ns, b.rbac, 30*time.Second); err != nil {
			return nil, fmt.Errorf("cluster backend: %w", err)
		}
		scaler = id.Config(admin, ns)
	}
	env := &sim.Env{
		Backend:          b.Name(),
		Namespace:        ns,
		RESTConfig:       rest.CopyConfig(admin),
		ControllerConfig: scaler,
		Observer:         observer,
		ControlPlane:     b.cfg.ControlPlane,
		Can: sim.Capabilities{
			sim.VirtualTime:      "a real cluster runs in real time",
			sim.RealAPIServer:    "",
			sim.RealControllers:  "",
			sim.NodeLifecycle:    "",
			sim.OutOfProcess:     "",
			sim.APIServerRestart: "the cluster's API server is not ours to restart",
			sim.EtcdCompaction:   "the cluster's etcd is not ours to compact",
			sim.KwokNodes:        "not a kwokctl cluster of our own",
		},
	}
	if b.cfg.ControlPlane != nil {
		env.Can[sim.APIServerRestart], env.Can[sim.EtcdCompaction] = "", ""
	}
	if b.cfg.Kwok {
		env.Can[sim.KwokNodes] = ""
	}
	return env, nil
}

// Stop deletes the run's namespace and waits, up to two minutes, until it
// is gone, so that the next run starts on controllers that are not still
// busy with this one (see sim.DeleteRunNamespace).
func (b *Backend) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ns == "" {
		return nil
	}
	err := sim.DeleteRunNamespace(b.observer, b.ns, 2*time.Minute)
	b.ns = ""
	return err
}

// upWait bounds how long a run waits for a supervised control plane's
// component that is being started again: its attempts and their waits.
const upWait = 2 * time.Minute

// awaitUp returns once no component of sup is down, or at once with the
// plane's error when one could not be started again (every run on it
// fails at once, naming it), or with an error when limit passes first.
func awaitUp(ctx context.Context, sup sim.Supervised, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if err := sup.Err(); err != nil {
			return err
		}
		outages, next := sup.Outages()
		var down []string
		for _, o := range outages {
			if o.Restarted.IsZero() {
				down = append(down, o.String())
			}
		}
		if len(down) == 0 {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("the control plane is still down after %v: %s", limit, strings.Join(down, "; "))
		}
	}
}
