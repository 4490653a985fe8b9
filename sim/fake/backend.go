package fake

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/converge-lab/converge/sim"
)

// Config configures the fake backend.
type Config struct {
	// Namespace is the namespace a run owns. Empty means "converge".
	Namespace string
	// Clock stamps creation and deletion times. Nil means the real clock,
	// which is virtual inside a synctest bubble.
	Clock clock.PassiveClock
	// HistoryLimit is how many writes are kept for watches to resume from.
	// Zero means 20,000.
	HistoryLimit int
	// CRDPaths are CustomResourceDefinition files or folders, installed
	// and established at Start (see sim.ReadCRDs).
	CRDPaths []string
	// Controller is the controller's identity and RBAC: the RBAC is stored
	// in the run's namespace and ControllerConfig acts as the identity,
	// authorized by it. Zero means a ControllerConfig with full rights.
	Controller sim.Identity
}

// Backend is the fake backend.
type Backend struct {
	cfg  Config
	crds []*apiextensionsv1.CustomResourceDefinition
	rbac []runtime.Object

	mu    sync.Mutex
	store *store
}

var _ sim.Backend = (*Backend)(nil)

// New validates cfg and returns a backend; it starts nothing.
func New(cfg Config) (*Backend, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "converge"
	}
	if msgs := validation.IsDNS1123Label(cfg.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("fake backend: namespace %q: %v", cfg.Namespace, msgs)
	}
	if cfg.HistoryLimit < 0 {
		return nil, fmt.Errorf("fake backend: history limit must not be negative, got %d", cfg.HistoryLimit)
	}
	if cfg.HistoryLimit == 0 {
		cfg.HistoryLimit = 20_000
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	crds, err := sim.ReadCRDs(cfg.CRDPaths...)
	if err != nil {
		return nil, fmt.Errorf("fake backend: %w", err)
	}
	rbac, err := cfg.Controller.Validate()
	if err != nil {
		return nil, fmt.Errorf("fake backend: %w", err)
	}
	return &Backend{cfg: cfg, crds: crds, rbac: rbac}, nil
}

// Name is the fake kind's name.
const Name = "fake"

// Name is the fake kind's name.
func (b *Backend) Name() string { return Name }

// Start creates the in-memory API and the run's namespace.
func (b *Backend) Start(ctx context.Context) (*sim.Env, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store != nil {
		return nil, errors.New("fake backend: already started")
	}
	b.store = newStore(b.cfg.Clock, b.cfg.HistoryLimit)
	b.store.start()
	observer := b.newClientLocked(false)
	// The namespaces a new cluster has, and the run's.
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease", b.cfg.Namespace} {
		_, err := observer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !(apierrors.IsAlreadyExists(err) && name == b.cfg.Namespace) {
			return nil, fmt.Errorf("fake backend: creating namespace %s: %w", name, err)
		}
	}
	h := &handler{s: b.store}
	admin := restConfig(h)
	if err := sim.InstallCRDs(ctx, admin, 0, b.crds...); err != nil {
		return nil, fmt.Errorf("fake backend: %w", err)
	}
	controller := restConfig(h)
	if id := b.cfg.Controller; !id.IsZero() {
		if err := id.ApplyRBAC(ctx, observer, b.cfg.Namespace, b.rbac); err != nil {
			return nil, fmt.Errorf("fake backend: %w", err)
		}
		controller = id.Config(admin, b.cfg.Namespace)
	}
	return &sim.Env{
		Backend:          b.Name(),
		Namespace:        b.cfg.Namespace,
		RESTConfig:       admin,
		ControllerConfig: controller,
		ControllerClient: b.newClientLocked(false),
		Observer:         observer,
		InProcess:        b,
		RESTMapper:       &mapper{s: b.store},
		Can: sim.Capabilities{
			sim.VirtualTime:      "",
			sim.RealAPIServer:    "no API server: requests never cross HTTP",
			sim.RealControllers:  "no kube-controller-manager: the world simulator plays the Deployment controller",
			sim.NodeLifecycle:    "no node lifecycle controller: Nodes stay as the world leaves them",
			sim.APIServerRestart: "no API server to restart",
			sim.EtcdCompaction:   "no etcd (Compact forgets watch history instead)",
			sim.OutOfProcess:     "no server for a controller binary to reach",
		},
	}, nil
}

// NewClient returns another clientset on the same in-memory API, for a
// second controller instance: each has its own reactor chain, so faults
// added to one do not touch the others.
func (b *Backend) NewClient() (*fake.Clientset, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store == nil {
		return nil, errors.New("fake backend: not started")
	}
	return b.newClientLocked(false), nil
}

// NewSharingClient is NewClient whose watches hand out the in-memory
// API's own objects instead of a copy per event: for a reader that never
// modifies what its informers hold, as client-go asks of every informer's
// reader, and that the harness trusts to keep it (the world simulator). A
// reader that modifies one changes what every other client is given. It
// saves a deep copy of every object written, per watch.
func (b *Backend) NewSharingClient() (*fake.Clientset, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store == nil {
		return nil, errors.New("fake backend: not started")
	}
	return b.newClientLocked(true), nil
}

// NewControllerClient is NewClient acting as the controller's identity:
// every request is authorized by the RBAC stored for it, as
// ControllerConfig's are, and refused with the API server's 403. Without
// an identity it is NewClient.
func (b *Backend) NewControllerClient() (*fake.Clientset, error) {
	return b.NewClientAs(b.cfg.Controller)
}

// NewClientAs is NewClient acting as id, for a controller other than the
// one Config names (a scenario may run several): every request is
// authorized by the RBAC stored for id in the run's namespace (stored
// through any client, as id.ApplyRBAC does), as a config that
// impersonates it is on the REST door. A zero id is NewClient.
func (b *Backend) NewClientAs(id sim.Identity) (*fake.Clientset, error) {
	cs, err := b.NewClient()
	if err != nil || id.IsZero() {
		return cs, err
	}
	name, groups := id.User(b.cfg.Namespace)
	b.store.authorizeActions(cs, user{name: name, groups: groups})
	return cs, nil
}

func (b *Backend) newClientLocked(share bool) *fake.Clientset {
	// Not NewClientset: its tracker, which parses the apply schema (a tenth
	// of a second per process), would go unused.
	//lint:ignore SA1019 deprecated in client-go v0.35 only, kept in v0.36 and v0.37
	cs := fake.NewSimpleClientset()
	cs.Resources = builtinResourceLists()
	b.store.install(cs, share)
	return cs
}

// Compact forgets the watch history, as an etcd compaction does: a watch
// that resumes from an older resourceVersion gets 410 Expired.
func (b *Backend) Compact() {
	b.mu.Lock()
	s := b.store
	b.mu.Unlock()
	if s != nil {
		s.compact()
	}
}

// Stop ends every watch, so informers see their streams close, and makes
// every later request fail with 503.
func (b *Backend) Stop() error {
	b.mu.Lock()
	s := b.store
	b.mu.Unlock()
	if s != nil {
		s.stop()
	}
	return nil
}
