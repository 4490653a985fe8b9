package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Kind is one sort of backend, as scenario files, flags and results name
// it: it makes the backend of each run. The kinds converge knows are listed
// in one place, package sim/backends; a value of a kind's own (an envtest
// kind on a control plane of the caller's, a cluster kind on a given
// kubeconfig) goes straight into scenarios.Options.
type Kind interface {
	// Name is how scenario files, flags and results name the kind.
	Name() string
	// Virtual says its runs live in a testing/synctest bubble, in virtual
	// time (Env.Can has VirtualTime).
	Virtual() bool
	// For returns the backend of one run, not yet started.
	For(ctx context.Context, r Run) (Backend, error)
}

// Run is what a kind is told of the run it makes a backend for.
type Run struct {
	// Name is the scenario's name: it prefixes the run's namespace where
	// runs share an API server.
	Name string
	// Controller is the controller's declared identity, or zero.
	Controller Identity
	// NoWatchCache: a fault of the run is felt only where watches are
	// served from storage (chaos.Plane), so a control plane started for it
	// has no watch cache.
	NoWatchCache bool
	// Setup is the invocation's; nil means the zero Setup.
	Setup *Setup
}

// Setup is what an invocation gives every run's backend: where a cluster
// is, and the resources its runs share.
type Setup struct {
	// Kubeconfig reaches a cluster for kinds that run on one; empty means
	// none was given.
	Kubeconfig string
	// Kwok is the folder of a running kwokctl cluster (sim/kwok) for kinds
	// that run on a cluster, or "start" for one started on first use and
	// deleted at Close.
	Kwok string
	// Shared holds what runs share (control planes, a kwok cluster),
	// started on first use and stopped by its Close. Nil means each kind's
	// process-wide default (envtest.SharedWith).
	Shared *Shared
}

// ClusterUser is a kind whose runs need a cluster from the invocation
// (Setup.Kubeconfig or Setup.Kwok).
type ClusterUser interface {
	UsesCluster() bool
}

// UsesCluster says whether k's runs need a cluster from the invocation.
func UsesCluster(k Kind) bool {
	c, ok := k.(ClusterUser)
	return ok && c.UsesCluster()
}

// ErrUnavailable marks an error of a kind that cannot run here and need not
// (its binaries are missing, no cluster was given, and nothing requires
// it): a test skips such a run, saying why, instead of failing it.
var ErrUnavailable = errors.New("backend unavailable here")

// Unavailable wraps err as ErrUnavailable.
func Unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

// Given is a kind made of one backend the caller built: every run gets b.
// Its name is b's.
func Given(b Backend) Kind { return given{b} }

type given struct{ b Backend }

func (g given) Name() string                              { return g.b.Name() }
func (g given) Virtual() bool                             { return false }
func (g given) For(context.Context, Run) (Backend, error) { return g.b, nil }

// Shared holds what an invocation's runs share, each started on first use
// under its key and stopped, last started first, by Close. The zero value
// is ready.
type Shared struct {
	mu    sync.Mutex
	items map[any]*sharedItem
	order []*sharedItem
}

type sharedItem struct {
	once sync.Once
	v    any
	stop func() error
	err  error
}

// Get returns the value under key, started by start the first time; a
// failed start is remembered and returned again, a start that panicked
// too (its caller gets the panic; the later ones an error that says so).
func (s *Shared) Get(key any, start func() (v any, stop func() error, err error)) (any, error) {
	s.mu.Lock()
	if s.items == nil {
		s.items = map[any]*sharedItem{}
	}
	it, ok := s.items[key]
	if !ok {
		it = &sharedItem{}
		s.items[key] = it
		s.order = append(s.order, it)
	}
	s.mu.Unlock()
	it.once.Do(func() {
		defer func() {
			if p := recover(); p != nil {
				it.v, it.stop, it.err = nil, nil, fmt.Errorf("its start panicked: %v", p)
				panic(p)
			}
		}()
		it.v, it.stop, it.err = start()
	})
	return it.v, it.err
}

// Close stops what was started, last first, and returns every error.
func (s *Shared) Close() error {
	s.mu.Lock()
	order := s.order
	s.items, s.order = nil, nil
	s.mu.Unlock()
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		it := order[i]
		it.once.Do(func() {}) // a start under way finishes first
		if it.stop != nil && it.err == nil {
			errs = append(errs, it.stop())
		}
	}
	return errors.Join(errs...)
}
