// Package fake is the in-memory backend: client-go's fake clientset with a
// realism layer in front of it, so a controller meets the semantics of a
// real API server, and whole runs fit in a testing/synctest bubble.
//
// What the layer provides:
//   - metadata.resourceVersion on every write, from one monotonic counter;
//     a no-op update keeps it;
//   - 409 Conflict, with the API server's Status body, on an update or patch
//     that carries a stale resourceVersion;
//   - metadata.generation 1 on create, bumped when anything outside metadata
//     and status changes; uid, creationTimestamp and generateName filled;
//   - status writes (the status subresource) change only status, and
//     main-resource writes never change status, for kinds with both;
//   - LIST answers carry the current resourceVersion and WATCH starts from
//     the one asked for (history replayed), so a delete between an
//     informer's LIST and WATCH is not lost; a watch from before the kept
//     history (or after Compact) gets 410 Expired, and the reflector relists;
//   - label selectors and metadata.name / metadata.namespace field selectors
//     on watches, with objects that stop or start matching seen as DELETED
//     or ADDED; an unbounded buffer per watcher, so no event is dropped and
//     the fake's 100-event watcher never panics;
//   - graceful deletion of pods bound to a node (deletionTimestamp set, the
//     kubelet finishes) and finalizers on every kind;
//   - the pods/binding subresource (spec.nodeName set once);
//   - metadata checked on create as the API server checks it, generated
//     names included: metadata.name by its resource's rule (a DNS-1123
//     subdomain for most kinds, a DNS-1123 label for Namespaces and
//     Services, a path segment for core Events and RBAC), the namespace's
//     name, labels, annotations, finalizers and owner references; a refused
//     create is a 422 Invalid with the causes, and stores nothing.
//
// What still differs from a real API server: no admission (an object in a
// missing namespace is stored), no validation beyond metadata on create and
// no defaulting (an invalid spec is stored as sent, and a pod's status is
// only reset to Pending on create); generated names end in a count of
// writes, not random letters; no server-side apply; no RBAC; other field
// selectors match nothing; no watch bookmarks and no streaming lists (the
// fake opts out of them, so informers LIST then WATCH); list pagination is
// ignored; resourceVersions are small decimal integers; the
// Deployment/ReplicaSet controllers and garbage collection are played by the
// world simulator, not the API.
package fake

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// Backend is the fake backend.
type Backend struct {
	cfg Config

	mu     sync.Mutex
	server *server
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
	return &Backend{cfg: cfg}, nil
}

// Name is "fake".
func (b *Backend) Name() string { return "fake" }

// Start creates the in-memory API and the run's namespace.
func (b *Backend) Start(ctx context.Context) (*sim.Env, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.server != nil {
		return nil, errors.New("fake backend: already started")
	}
	b.server = newServer(b.cfg.Clock, b.cfg.HistoryLimit)
	observer := b.newClientLocked()
	if _, err := observer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: b.cfg.Namespace},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("fake backend: creating namespace: %w", err)
	}
	return &sim.Env{
		Backend:          b.Name(),
		Namespace:        b.cfg.Namespace,
		ControllerClient: b.newClientLocked(),
		Observer:         observer,
		Can: sim.Capabilities{
			sim.VirtualTime:      "",
			sim.RealAPIServer:    "no API server: requests never cross HTTP",
			sim.RealControllers:  "no kube-controller-manager: the world simulator plays the Deployment controller",
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
	if b.server == nil {
		return nil, errors.New("fake backend: not started")
	}
	return b.newClientLocked(), nil
}

func (b *Backend) newClientLocked() *fake.Clientset {
	cs := fake.NewClientset()
	b.server.install(&cs.Fake)
	return cs
}

// Compact forgets the watch history, as an etcd compaction does: a watch
// that resumes from an older resourceVersion gets 410 Expired.
func (b *Backend) Compact() {
	b.mu.Lock()
	s := b.server
	b.mu.Unlock()
	if s != nil {
		s.compact()
	}
}

// Stop ends every watch, so informers see their streams close, and makes
// every later request fail with 503.
func (b *Backend) Stop() error {
	b.mu.Lock()
	s := b.server
	b.mu.Unlock()
	if s != nil {
		s.stop()
	}
	return nil
}
