package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned"
	mirrorinformers "github.com/converge-lab/converge/examples/mirror/generated/informers/externalversions"
	mirrorlisters "github.com/converge-lab/converge/examples/mirror/generated/listers/api/v1alpha1"
)

// ErrLeaderElectionLost is returned by Run when the Lease was lost while
// leading: another instance may be leading already, so this one stopped.
var ErrLeaderElectionLost = errors.New("mirror: leader election lost")

// Controller keeps the targets of every Mirror of one namespace equal to
// their source. Create it with New and start it with Run.
type Controller struct {
	cfg     Config
	kube    kubernetes.Interface
	mirrors versioned.Interface

	kubeInformers   kubeinformers.SharedInformerFactory
	mirrorInformers mirrorinformers.SharedInformerFactory
	mirrorLister    mirrorlisters.MirrorLister
	mirrorIndex     cache.Indexer
	configMapLister corelisters.ConfigMapLister
	configMapIndex  cache.Indexer
	synced          []cache.InformerSynced

	// queue is set by Run before the informers start, so handlers and
	// workers read it freely; Probe may run before that and takes mu.
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]

	// kept is BugKeptMirrors' own copy of each Mirror seen.
	kept sync.Map

	started    atomic.Bool
	leading    atomic.Bool
	inFlight   atomic.Int32
	reconciles atomic.Int64
	retries    atomic.Int64
}

// New returns a controller that reads and writes ConfigMaps and Leases
// through kube and Mirrors through mirrors. It validates cfg and fills its
// defaults; it starts nothing.
func New(cfg Config, kube kubernetes.Interface, mirrors versioned.Interface) (*Controller, error) {
	if kube == nil || mirrors == nil {
		return nil, errors.New("mirror: both clients are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("mirror: invalid config: %w", err)
	}
	c := &Controller{cfg: cfg, kube: kube, mirrors: mirrors}

	// No resync: every change arrives as an event, and a missed link
	// between events and keys shows as a bug instead of being papered over.
	c.kubeInformers = kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(cfg.Namespace),
		kubeinformers.WithTransform(cfg.CacheTransform))
	c.mirrorInformers = mirrorinformers.NewSharedInformerFactoryWithOptions(mirrors, 0, mirrorinformers.WithNamespace(cfg.Namespace),
		mirrorinformers.WithTransform(cfg.CacheTransform))
	mirrorInformer := c.mirrorInformers.Examples().V1alpha1().Mirrors()
	configMapInformer := c.kubeInformers.Core().V1().ConfigMaps()
	c.mirrorLister = mirrorInformer.Lister()
	c.configMapLister = configMapInformer.Lister()

	if err := mirrorInformer.Informer().AddIndexers(cache.Indexers{
		mirrorsBySource: indexMirrorsBySource,
		mirrorsByTarget: indexMirrorsByTarget,
	}); err != nil {
		return nil, fmt.Errorf("mirror: mirror indexes: %w", err)
	}
	if err := configMapInformer.Informer().AddIndexers(cache.Indexers{
		configMapsByOwner: indexConfigMapsByOwner,
	}); err != nil {
		return nil, fmt.Errorf("mirror: configmap index: %w", err)
	}
	c.mirrorIndex = mirrorInformer.Informer().GetIndexer()
	c.configMapIndex = configMapInformer.Informer().GetIndexer()

	if _, err := mirrorInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueMirror,
		UpdateFunc: func(_, obj any) { c.enqueueMirror(obj) },
	}); err != nil {
		return nil, fmt.Errorf("mirror: mirror handler: %w", err)
	}
	if _, err := configMapInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addConfigMap,
		UpdateFunc: c.updateConfigMap,
		DeleteFunc: c.deleteConfigMap,
	}); err != nil {
		return nil, fmt.Errorf("mirror: configmap handler: %w", err)
	}
	c.synced = []cache.InformerSynced{mirrorInformer.Informer().HasSynced, configMapInformer.Informer().HasSynced}
	return c, nil
}

// Probe samples the controller for the harness: how many keys wait in the
// queue, whether a reconcile is running, and how many reconciles have ended
// since Run started. It is safe to call at any time.
func (c *Controller) Probe() (queueDepth int, busy bool, reconciles int64) {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q != nil {
		queueDepth = q.Len()
	}
	return queueDepth, c.inFlight.Load() > 0, c.reconciles.Load()
}

// Retries is how many times a key that failed was put back in the queue.
func (c *Controller) Retries() int64 { return c.retries.Load() }

// Run starts the informers, waits for their caches, takes the Lease when
// electing, and reconciles with Config.Workers workers until ctx ends. Then
// it shuts the queue down, waits for the workers, gives the Lease up and
// stops the informers: every goroutine it started has ended when it
// returns. It returns nil after ctx ended and ErrLeaderElectionLost when
// the Lease was lost. Run may be called once.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("mirror: Run called twice")
	}
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("mirror")
	ctx = klog.NewContext(ctx, logger)

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "mirror"})
	c.mu.Lock()
	c.queue = queue
	c.mu.Unlock()

	// Run may return before ctx ends (a lost Lease): the informers get a
	// context of their own, cancelled on the way out.
	informerCtx, stopInformers := context.WithCancel(ctx)
	c.kubeInformers.Start(informerCtx.Done())
	c.mirrorInformers.Start(informerCtx.Done())
	defer func() {
		queue.ShutDown()
		stopInformers()
		c.kubeInformers.Shutdown()
		c.mirrorInformers.Shutdown()
		logger.Info("Stopped")
	}()

	// WaitForCacheSync, not the Named variant: that one reports a cancelled
	// wait through utilruntime.HandleError, whose process-global backoff
	// sleeps for years under a virtual clock.
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	if c.cfg.LeaderElection != nil {
		return c.runElected(ctx)
	}
	c.leading.Store(true)
	defer c.leading.Store(false)
	c.work(ctx)
	return nil
}

// Leading reports whether the controller works now: it leads, or elects
// no leader. A standby's queue fills while it waits, as it should.
func (c *Controller) Leading() bool { return c.leading.Load() }

// work runs the workers until ctx ends, then shuts the queue down and waits
// for them.
func (c *Controller) work(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var workers sync.WaitGroup
	for range c.cfg.Workers {
		workers.Go(func() {
			defer utilruntime.HandleCrashWithContext(ctx)
			c.runWorker(ctx)
		})
	}
	logger.Info("Started workers", "workers", c.cfg.Workers)
	<-ctx.Done()
	c.queue.ShutDown()
	workers.Wait()
	logger.Info("Workers stopped")
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	c.inFlight.Add(1)
	err := c.sync(ctx, key)
	c.inFlight.Add(-1)
	c.reconciles.Add(1)
	c.handleErr(ctx, key, err)
	return true
}

// handleErr forgets a key that synced and retries a failed one with
// per-key exponential backoff. Errors are logged with the context's logger,
// not utilruntime.HandleError, whose global backoff misbehaves under a
// virtual clock.
func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, err error) {
	if err == nil {
		c.queue.Forget(key)
		return
	}
	klog.FromContext(ctx).V(2).Info("Retrying", "mirror", key, "attempt", c.queue.NumRequeues(key)+1, "err", err)
	c.retries.Add(1)
	if c.cfg.Bug == BugRetryNoBackoff {
		c.queue.Add(key) // the bug: no backoff
		return
	}
	c.queue.AddRateLimited(key)
}
