package envtest

import (
	"time"

	"context"
	"errors"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/sim"
)

// Backend is one run on a shared ControlPlane: it owns a fresh namespace.
type Backend struct {
	cp       *ControlPlane
	prefix   string
	crds     []*apiextensionsv1.CustomResourceDefinition
	id       sim.Identity
	rbac     []runtime.Object
	mu       sync.Mutex
	ns       string
	observer kubernetes.Interface
}

var _ sim.Backend = (*Backend)(nil)

// NewBackend returns a backend on cp whose namespaces are named prefix plus
// a random suffix. Empty prefix means "converge-".
func NewBackend(cp *ControlPlane, prefix string) (*Backend, error) {
	return NewBackendWith(cp, BackendConfig{Prefix: prefix})
}

// BackendConfig configures one run on a shared control plane.
type BackendConfig struct {
	// Prefix names the run's namespace. Empty means "converge-".
	Prefix string
	// CRDPaths are CustomResourceDefinition files or folders, installed
	// (or updated) and established at Start, like envtest's
	// CRDDirectoryPaths; left installed at Stop, since other runs on the
	// control plane may use them (see sim.ReadCRDs).
	CRDPaths []string
	// Controller is the controller's identity and RBAC, applied in the
	// run's namespace; ControllerConfig then acts as it. Zero means full
	// rights.
	Controller sim.Identity
}

// NewBackendWith returns a backend on cp configured by cfg; it reads the
// CRD files now, so a bad one fails before any run.
func NewBackendWith(cp *ControlPlane, cfg BackendConfig) (*Backend, error) {
	if cp == nil {
		return nil, errors.New("envtest backend: control plane is nil")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "converge-"
	}
	crds, err := sim.ReadCRDs(cfg.CRDPaths...)
	if err != nil {
		return nil, fmt.Errorf("envtest backend: %w", err)
	}
	rbac, err := cfg.Controller.Validate()
	if err != nil {
		return nil, fmt.Errorf("envtest backend: %w", err)
	}
	return &Backend{cp: cp, prefix: cfg.Prefix, crds: crds, id: cfg.Controller, rbac: rbac}, nil
}

// Name is the envtest kind's name.
const Name = "envtest"

// Name is the envtest kind's name.
func (b *Backend) Name() string { return Name }

// Start creates the run's namespace.
func (b *Backend) Start(ctx context.Context) (*sim.Env, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ns != "" {
		return nil, errors.New("envtest backend: already started")
	}
	// A plane whose component is being started again is waited for; one
	// that could not be fails the run at once.
	ready, cancel := context.WithTimeout(ctx, 2*restartAttempts*restartReady)
	defer cancel()
	if err := b.cp.WaitReady(ready); err != nil {
		return nil, fmt.Errorf("envtest backend: %w", err)
	}
	observer, err := kubernetes.NewForConfig(b.cp.AdminConfig())
	if err != nil {
		return nil, err
	}
	if err := sim.InstallCRDs(ctx, b.cp.AdminConfig(), 0, b.crds...); err != nil {
		return nil, fmt.Errorf("envtest backend: %w", err)
	}
	ns, err := sim.CreateRunNamespace(ctx, observer, b.prefix)
	if err != nil {
		return nil, fmt.Errorf("envtest backend: %w", err)
	}
	b.ns, b.observer = ns, observer
	controllerConfig := b.cp.AdminConfig()
	if !b.id.IsZero() {
		if err := b.id.ApplyRBAC(ctx, observer, ns, b.rbac); err != nil {
			return nil, fmt.Errorf("envtest backend: %w", err)
		}
		if err := b.id.WaitEffective(ctx, observer, ns, b.rbac, 30*time.Second); err != nil {
			return nil, fmt.Errorf("envtest backend: %w", err)
		}
		controllerConfig = b.id.Config(b.cp.AdminConfig(), ns)
	}
	compaction := ""
	if !b.cp.opts.NoWatchCache {
		compaction = "etcd is compacted, but the API server's watch cache answers watches from recent resourceVersions itself: no 410 reaches clients (start the control plane with Options.NoWatchCache)"
	}
	return &sim.Env{
		Backend:          b.Name(),
		Namespace:        ns,
		RESTConfig:       b.cp.AdminConfig(),
		ControllerConfig: controllerConfig,
		Observer:         observer,
		ControlPlane:     b.cp,
		Can: sim.Capabilities{
			sim.VirtualTime:      "real processes run in real time",
			sim.RealAPIServer:    "",
			sim.RealControllers:  "",
			sim.NodeLifecycle:    "kube-controller-manager runs the deployment, replicaset, garbagecollector and namespace controllers only",
			sim.OutOfProcess:     "",
			sim.APIServerRestart: "",
			sim.EtcdCompaction:   compaction,
		},
	}, nil
}

// Stop deletes the run's namespace and waits, up to two minutes, until it
// is gone, so that the next run starts on controllers that are not still
// busy with this one (see sim.DeleteRunNamespace); at once, with the
// plane's error, when the plane breaks meanwhile. A failure says what the
// components' logs last said.
func (b *Backend) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ns == "" {
		return nil
	}
	err := sim.DeleteRunNamespaceContext(b.cp.healthy, b.observer, b.ns, 2*time.Minute)
	b.ns = ""
	if err != nil && b.cp.Err() == nil {
		err = fmt.Errorf("%w\nthe control plane's logs end with:\n%s", err, b.cp.LogTails(tailLines))
	}
	return err
}

var (
	sharedMu sync.Mutex
	shared   = map[Options]*sharedPlane{}
)

type sharedPlane struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Shared returns the control plane every run of this test binary shares,
// starting it on first use. Main stops it.
func Shared(ctx context.Context) (*ControlPlane, error) { return SharedWith(ctx, Options{}) }

// SharedWith is Shared for a control plane started with opts: one per
// distinct opts per test binary.
func SharedWith(ctx context.Context, opts Options) (*ControlPlane, error) {
	sharedMu.Lock()
	p := shared[opts]
	if p == nil {
		p = &sharedPlane{}
		shared[opts] = p
	}
	sharedMu.Unlock()
	p.once.Do(func() { p.cp, p.err = StartControlPlaneWith(ctx, opts) })
	return p.cp, p.err
}

// SharedPlanes are the shared control planes started so far.
func SharedPlanes() []*ControlPlane {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var out []*ControlPlane
	for _, p := range shared {
		if p.cp != nil {
			out = append(out, p.cp)
		}
	}
	return out
}

// StopShared stops the shared control planes (see simtest.Main, which
// calls it after a test binary's tests).
func StopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var errs []error
	for _, p := range shared {
		if p.cp == nil {
			continue
		}
		if err := p.cp.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("envtest: stopping a shared control plane: %w", err))
		}
	}
	return errors.Join(errs...)
}
