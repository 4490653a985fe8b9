package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-lab/converge/internal/crversion"
	"github.com/converge-lab/converge/scenarios/internal/workqueues"
	"github.com/converge-lab/converge/sim"
)

// Manager is a controller-runtime manager as a controller under test: each
// instance is a manager built on the instance's config (through the fault
// layer, as the controller's identity), its cache limited to the run's
// namespace, no metrics or health listener (none may run in virtual time),
// controller names not checked for uniqueness (instances share a process),
// and, when the scenario runs several instances, leader election on the
// instance's Lease, released on cancel. Setup adds the reconcilers. With a
// controller-runtime before v0.25, whose priority queue can deadlock when
// a controller stops in process (every crash, SIGTERM and failover of a
// run stops one), the controllers run without it unless Options sets
// Controller.UsePriorityQueue.
//
// Instances are probed from controller-runtime's metrics, which its
// registry holds for the whole process: the probe sums the work queues of
// every controller in it, so managers of runs that overlap in one process
// see each other's work: it is OneAtATime, so scenariotest runs its
// scenarios one after another.
type Manager struct {
	// ControllerName names the controller in results. Empty means
	// "manager".
	ControllerName string
	// Setup adds the controllers to mgr; in is the instance it serves.
	Setup func(mgr manager.Manager, in Instance) error
	// Scheme knows the controller's types. Nil means client-go's scheme.
	Scheme *runtime.Scheme
	// RBAC is the identity the controller runs as (see Identified). Zero
	// means full rights.
	RBAC sim.Identity
	// Options, when set, adjusts the manager's options after the
	// harness's.
	Options func(*manager.Options)
	// Judge, when set, builds the controller's own checks for each run.
	NewJudge func() Judge
}

var (
	_ Controller = Manager{}
	_ Identified = Manager{}
	_ OneAtATime = Manager{}
)

// OneAtATime: the probe sums the metrics of every manager in the process,
// so two runs side by side would each judge the other's work as theirs.
func (Manager) OneAtATime() string {
	return "its probe reads controller-runtime's metrics, which every manager in the process shares"
}

// Name is ControllerName.
func (m Manager) Name() string {
	if m.ControllerName == "" {
		return "manager"
	}
	return m.ControllerName
}

// UsesConfig: a manager reaches the API through its config.
func (Manager) UsesConfig() bool { return true }

// Identity is m.RBAC.
func (m Manager) Identity() sim.Identity { return m.RBAC }

// Judge builds m's checks, if it has any.
func (m Manager) Judge() Judge {
	if m.NewJudge == nil {
		return nil
	}
	return m.NewJudge()
}

// New builds the instance's manager and sets it up.
func (m Manager) New(in Instance) (Runner, error) {
	if m.Setup == nil {
		return nil, errors.New("manager: Setup is nil")
	}
	opts := manager.Options{
		Scheme:                 m.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{in.Namespace: {}}},
		Logger:                 klog.Background().WithValues("instance", in.Identity),
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if le := in.LeaderElection; le != nil {
		opts.LeaderElection = true
		opts.LeaderElectionResourceLock = "leases"
		opts.LeaderElectionNamespace = le.Namespace
		opts.LeaderElectionID = le.Name
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration = ptr.To(le.LeaseDuration)
		opts.RenewDeadline = ptr.To(le.RenewDeadline)
		opts.RetryPeriod = ptr.To(le.RetryPeriod)
	}
	if m.Options != nil {
		m.Options(&opts)
	}
	if opts.Controller.UsePriorityQueue == nil && !crversion.PriorityQueueStops() {
		opts.Controller.UsePriorityQueue = ptr.To(false)
		logPriorityQueueOff()
	}
	watchCache(&opts.Cache, in.CacheTransform)
	mgr, err := manager.New(in.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if err := m.Setup(mgr, in); err != nil {
		return nil, fmt.Errorf("manager: setup: %w", err)
	}
	r := &managerRunner{mgr: mgr, leading: in.LeaderElection == nil}
	dropProcessCollectors()
	r.base = gather()
	return r, nil
}

// watchCache makes track the last transform of every object the cache
// holds, after the controller's own.
func watchCache(opts *cache.Options, track toolscache.TransformFunc) {
	if track == nil {
		return
	}
	then := func(first toolscache.TransformFunc) toolscache.TransformFunc {
		if first == nil {
			return track
		}
		return func(obj any) (any, error) {
			obj, err := first(obj)
			if err != nil {
				return obj, err
			}
			return track(obj)
		}
	}
	// A namespace's or an object's own transform replaces the default, so
	// each is wrapped; one left nil takes the wrapped default.
	for obj, by := range opts.ByObject {
		if by.Transform != nil {
			by.Transform = then(by.Transform)
			opts.ByObject[obj] = by
		}
		for ns, c := range by.Namespaces {
			if c.Transform != nil {
				c.Transform = then(c.Transform)
				by.Namespaces[ns] = c
			}
		}
	}
	for ns, c := range opts.DefaultNamespaces {
		if c.Transform != nil {
			c.Transform = then(c.Transform)
			opts.DefaultNamespaces[ns] = c
		}
	}
	opts.DefaultTransform = then(opts.DefaultTransform)
}

type managerRunner struct {
	mgr     manager.Manager
	leading bool
	elected atomic.Bool
	// base is the process's metrics when the instance was built: managers
	// that ran before it (a run's earlier instances, earlier runs) leave
	// their queues' gauges where they stopped.
	base crMetrics
}

// Run starts the manager until ctx ends.
func (r *managerRunner) Run(ctx context.Context) error {
	go func() {
		select {
		case <-r.mgr.Elected():
			r.elected.Store(true)
		case <-ctx.Done():
		}
	}()
	return r.mgr.Start(ctx)
}

// Probe reads controller-runtime's metrics (see Manager), less what they
// held when the instance was built.
func (r *managerRunner) Probe() Probe {
	now := gather()
	return Probe{
		Leading:    r.leading || r.elected.Load(),
		QueueDepth: int(max(now.depth-r.base.depth, 0)),
		Busy:       now.active > r.base.active,
		Reconciles: int64(max(now.reconciles-r.base.reconciles, 0)),
		Retries:    int64(max(now.retries-r.base.retries, 0)),
		// controller-runtime's workqueue_retries_total.
		CountsRetries: true,
	}
}

// dropProcessCollectors takes the process and Go runtime collectors out of
// the registries gather reads, once a process has built a manager to run.
// Both registries register them for a metrics endpoint, which a manager
// under test does not serve; they describe the test process, not a run;
// and each probe gathered them: reading /proc and the runtime's metrics
// was most of a gather, and 7% of the webapp's CPU in an exploration.
// A collector of the same kind matches the registered one (a registry
// unregisters by the metrics' names), as client_golang is one module in a
// binary.
var dropProcessCollectors = sync.OnceFunc(func() {
	for _, r := range []prometheus.Registerer{metrics.Registry, legacyregistry.Registerer()} {
		r.Unregister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		r.Unregister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)))
	}
})

// crMetrics are controller-runtime's metrics of every controller in the
// process, summed.
type crMetrics struct {
	depth, active, reconciles, retries float64
}

// gather reads them. A controller's work queue reports to the workqueue
// metrics provider client-go was given first: controller-runtime's
// priority queue always to controller-runtime's registry, but its other
// queue (UsePriorityQueue false) to whichever package of the binary set
// client-go's provider first: converge's (package workqueues), or where a
// package of the binary came first, component-base's (imported by
// k8s.io/apiserver) with its legacy registry, or controller-runtime's. So
// depth and retries are read from all three, the legacy registry's and
// converge's only for the controllers controller-runtime counts
// reconciles of: a queue reports to one of them.
func gather() crMetrics {
	var m crMetrics
	controllers := map[string]bool{}
	queues := func(f *dto.MetricFamily, only map[string]bool) {
		for _, s := range f.GetMetric() {
			if only != nil && !only[label(s, "name")] {
				continue
			}
			switch f.GetName() {
			case "workqueue_depth":
				m.depth += s.GetGauge().GetValue()
			case "workqueue_retries_total":
				m.retries += s.GetCounter().GetValue()
			}
		}
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return m
	}
	for _, f := range families {
		queues(f, nil)
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "controller_runtime_active_workers":
				m.active += s.GetGauge().GetValue()
				controllers[label(s, "controller")] = true
			case "controller_runtime_reconcile_total":
				m.reconciles += s.GetCounter().GetValue()
				controllers[label(s, "controller")] = true
			}
		}
	}
	// Gathering the legacy registry was half of a probe: it is read only
	// while the process's queues may report there.
	if !workqueues.Reporting() {
		if legacy, err := legacyregistry.DefaultGatherer.Gather(); err == nil {
			for _, f := range legacy {
				queues(f, controllers)
			}
		}
	}
	q := workqueues.Totals(controllers)
	m.depth += float64(q.Depth())
	m.retries += float64(q.Retries)
	return m
}

func label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
