package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Event reasons.
const (
	ReasonScaledUp           = "ScaledUp"
	ReasonInvalidMaxReplicas = "InvalidMaxReplicas"
	ReasonInvalidSelector    = "InvalidSelector"
	ReasonRejected           = "ScaleRejected"
	ReasonRetriesExhausted   = "RetriesExhausted"
)

// Controller is the scaler. Create it with New and start it with Run.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	clock  clock.WithTicker

	deployFactory   informers.SharedInformerFactory
	podFactory      informers.SharedInformerFactory
	deployments     appslisters.DeploymentLister
	pods            corelisters.PodLister
	podIndex        cache.Indexer
	deploymentIndex cache.Indexer
	synced          []cache.InformerSynced

	registry *prometheus.Registry // nil when the caller gave a Registerer
	metrics  *metrics

	// Set by Run before informers start; read by handlers and workers.
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder record.EventRecorder

	logger       klog.Logger // Run's; the handlers log with it
	leaderHealth *leaderelection.HealthzAdaptor
	started      atomic.Bool
	ready        atomic.Bool
	phase        atomic.Value // string: why not ready

	// warned holds the message of the last Warning Event per key, so a
	// Deployment that stays invalid is reported once, not on every pass.
	warned keyedStrings
	// conflicted holds the resourceVersion a write lost a 409 on, so the
	// key is retried when a newer version reaches the cache even if that
	// version changes nothing the update filter looks at.
	conflicted keyedStrings
	// exhausted marks the keys that ran out of quick retries and are tried
	// once per cooldown, so the outage is reported once, not every time.
	exhausted keyedStrings
	// written remembers each successful write until the cache shows it: a
	// reconcile on an older version would decide on state the scaler has
	// itself just replaced.
	writtenMu sync.Mutex
	written   map[cache.ObjectName]ownWrite
}

// New returns a scaler that uses client for every read and write. It
// validates cfg and fills its defaults; it starts nothing.
func New(cfg Config, client kubernetes.Interface) (*Controller, error) {
	if client == nil {
		return nil, errors.New("controller: client is nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("controller: invalid config: %w", err)
	}
	c := &Controller{cfg: cfg, client: client, clock: cfg.Clock}
	c.phase.Store("not started")

	reg := cfg.Registerer
	if reg == nil {
		c.registry = prometheus.NewRegistry()
		reg = c.registry
	}
	if c.metrics, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("controller: registering metrics: %w", err)
	}

	// Only opted-in Deployments are listed and watched: the API server
	// filters, so an unlabelled Deployment never reaches the cache and can
	// never be written.
	optIn := labels.SelectorFromSet(labels.Set{LabelEnabled: ValueEnabled}).String()
	c.deployFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = optIn }),
		informers.WithTransform(dropManagedFields))
	c.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTransform(dropManagedFields))

	deployInformer := c.deployFactory.Apps().V1().Deployments()
	podInformer := c.podFactory.Core().V1().Pods()
	c.deployments = deployInformer.Lister()
	c.pods = podInformer.Lister()

	if _, err := deployInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addDeployment,
		UpdateFunc: c.updateDeployment,
		DeleteFunc: c.deleteDeployment,
	}); err != nil {
		return nil, fmt.Errorf("controller: deployment handler: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("controller: pod handler: %w", err)
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podsByLabel: indexPodsByLabel}); err != nil {
		return nil, fmt.Errorf("controller: pod index: %w", err)
	}
	if err := deployInformer.Informer().AddIndexers(cache.Indexers{deploymentsBySelectorLabel: indexDeploymentsBySelectorLabel}); err != nil {
		return nil, fmt.Errorf("controller: deployment index: %w", err)
	}
	c.podIndex = podInformer.Informer().GetIndexer()
	c.deploymentIndex = deployInformer.Informer().GetIndexer()
	c.synced = []cache.InformerSynced{deployInformer.Informer().HasSynced, podInformer.Informer().HasSynced}
	if cfg.LeaderElection != nil {
		c.leaderHealth = leaderelection.NewLeaderHealthzAdaptor(cfg.LeaderElection.LeaseDuration)
	}
	return c, nil
}

// Registry returns the private metrics registry, or nil when Config gave a
// Registerer.
func (c *Controller) Registry() *prometheus.Registry { return c.registry }

// Run starts the informers, waits for their caches, takes the Lease when
// electing, starts the workers and blocks until ctx ends or leadership is
// lost. Then it shuts down: not ready, queue shut down, in-flight reconciles
// drained (bounded by ShutdownGrace), Lease released, informers stopped
// (waited for at most 5s: see stopInformers).
// It returns nil after a shutdown asked for by ctx, ErrLeaderElectionLost
// when the Lease was lost, and ErrShutdownGraceExceeded when in-flight work
// had to be cancelled. Run may be called once.
func (c *Controller) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("controller: Run called twice")
	}
	logger := klog.FromContext(ctx).WithName("scaler")
	ctx = klog.NewContext(ctx, logger)
	c.logger = logger
	defer utilruntime.HandleCrashWithContext(ctx)

	// Informers, events and the elector outlive ctx: they stop only after
	// the workers have drained, in the deferred calls below.
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()

	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 1000*time.Second),
			&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{
			Name:            c.cfg.QueueName,
			MetricsProvider: workqueueMetrics{c.metrics},
			Clock:           c.clock,
		})
	defer c.queue.ShutDown()

	stopEvents := c.startEvents(bgCtx)
	defer stopEvents()

	c.phase.Store("waiting for caches to sync")
	c.deployFactory.Start(bgCtx.Done())
	c.podFactory.Start(bgCtx.Done())
	defer func() {
		stopBackground()
		c.stopInformers(logger)
	}()
	logger.Info("Waiting for informer caches to sync")
	// WaitForCacheSync, not the Named variant: that one reports a cancelled
	// wait through utilruntime.HandleError, whose global backoff sleeps for
	// years under a virtual clock.
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		logger.Info("Stopped before caches synced", "reason", context.Cause(ctx))
		return nil
	}

	var lease *elector
	if le := c.cfg.LeaderElection; le != nil {
		c.phase.Store("waiting for leadership")
		var err error
		if lease, err = c.startElector(bgCtx, logger); err != nil {
			return err
		}
		defer lease.release()
		select {
		case <-lease.leading:
		case <-lease.stopped:
			return fmt.Errorf("controller: %w before leading", ErrLeaderElectionLost)
		case <-ctx.Done():
			logger.Info("Stopped before leading", "reason", context.Cause(ctx))
			return nil
		}
	}

	// Workers get their own context: it is cancelled only when the grace
	// period runs out or leadership is lost, so a graceful stop lets
	// in-flight writes finish.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var workers sync.WaitGroup
	for range c.cfg.Workers {
		workers.Go(func() { c.runWorker(workCtx) })
	}
	c.ready.Store(true)
	c.metrics.leader.Set(1)
	logger.Info("Started workers", "workers", c.cfg.Workers)

	var runErr error
	var lost <-chan struct{}
	if lease != nil {
		lost = lease.stopped
	}
	select {
	case <-ctx.Done():
		logger.Info("Shutting down", "reason", context.Cause(ctx))
	case <-lost:
		logger.Error(nil, "Lost leadership, stopping all work")
		runErr = ErrLeaderElectionLost
		stopWork() // another instance may lead already: do not finish writes
	}
	c.ready.Store(false)
	c.phase.Store("shutting down")
	c.metrics.leader.Set(0)
	c.queue.ShutDown()
	if !c.waitFor(&workers, c.cfg.ShutdownGrace) {
		logger.Error(nil, "In-flight reconciles outlived the shutdown grace, cancelling them", "grace", c.cfg.ShutdownGrace)
		stopWork()
		workers.Wait()
		runErr = errors.Join(runErr, ErrShutdownGraceExceeded)
	}
	logger.Info("Workers stopped")
	return runErr
}

// informerStopGrace bounds the wait for the informers to stop.
const informerStopGrace = 5 * time.Second

// stopInformers stops the informers and waits for them, at most
// informerStopGrace: client-go's watch-list reflector sleeps its retry
// backoff (up to a minute after an outage) without watching for the stop,
// and a shutdown must not wait that out. Such a reflector's goroutine ends
// by itself once its sleep is over.
func (c *Controller) stopInformers(logger klog.Logger) {
	stopped := make(chan struct{})
	go func() {
		c.deployFactory.Shutdown()
		c.podFactory.Shutdown()
		close(stopped)
	}()
	t := c.clock.NewTimer(informerStopGrace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C():
		logger.Info("Not waiting for the informers to stop", "reason", "a reflector is sleeping a retry backoff", "waited", informerStopGrace)
	}
}

// waitFor waits for wg at most d on the controller's clock.
func (c *Controller) waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C():
		return false
	}
}

func (c *Controller) startEvents(ctx context.Context) (stop func()) {
	if c.cfg.EventRecorder != nil {
		c.recorder = c.cfg.EventRecorder
		return func() {}
	}
	// No StartStructuredLogging: the scaler logs its own decisions, and that
	// watcher logs through klog's global logger from a goroutine that
	// Shutdown does not wait for.
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	source := corev1.EventSource{Component: c.cfg.EventSource}
	if le := c.cfg.LeaderElection; le != nil {
		source.Host = le.Identity
	}
	c.recorder = b.NewRecorder(scheme.Scheme, source)
	return b.Shutdown
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

	start := c.clock.Now()
	requeued, err := c.sync(ctx, key)
	c.metrics.reconcileTime.Observe(c.clock.Since(start).Seconds())
	if err == nil {
		c.recovered(ctx, key)
	}
	if requeued && err == nil {
		c.queue.Forget(key)
		c.metrics.reconciles.WithLabelValues(resultRequeue).Inc()
		return true
	}
	c.handleErr(ctx, key, err)
	return true
}

// handleErr decides what happens to a key after a sync: forgotten on
// success, reported once and forgotten on a permanent error, retried with
// backoff up to MaxRetries, then tried once per cooldown until it succeeds.
//
// A key is never dropped for good: with no resync, a Deployment that nobody
// changes gets no event, so a key given up on during an outage would stay
// unreconciled after the outage ends.
func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case err == nil:
		c.queue.Forget(key)
		c.metrics.reconciles.WithLabelValues(resultSuccess).Inc()
	case !retryable(err):
		c.queue.Forget(key)
		c.exhausted.delete(key)
		c.metrics.reconciles.WithLabelValues(resultPermanent).Inc()
		logger.Info("Not retrying", "deployment", key, "reason", eventReason(err), "err", err)
		c.warnOnce(key, eventReason(err), err.Error())
	case c.queue.NumRequeues(key) < c.cfg.MaxRetries:
		c.metrics.reconciles.WithLabelValues(resultError).Inc()
		logger.V(2).Info("Retrying", "deployment", key, "attempt", c.queue.NumRequeues(key)+1, "err", err)
		c.queue.AddRateLimited(key)
	default:
		// The requeue count stays at MaxRetries until a success forgets
		// it, so every failure from here waits a whole cooldown.
		c.metrics.reconciles.WithLabelValues(resultExhausted).Inc()
		c.queue.AddAfter(key, c.cfg.Cooldown)
		if !c.exhausted.swap(key, "exhausted") {
			logger.V(2).Info("Still failing", "deployment", key, "next", c.cfg.Cooldown, "err", err)
			return
		}
		c.metrics.exhaustedKeys.Inc()
		logger.Error(err, "Retries exhausted, trying once per cooldown", "deployment", key, "retries", c.cfg.MaxRetries, "every", c.cfg.Cooldown)
		if d, getErr := c.deployments.Deployments(key.Namespace).Get(key.Name); getErr == nil {
			c.recorder.Eventf(d, corev1.EventTypeWarning, ReasonRetriesExhausted,
				"%d retries failed, trying again every %v: %v", c.cfg.MaxRetries, c.cfg.Cooldown, err)
		}
	}
}

// recovered ends the once-per-cooldown tries of key after a sync that
// succeeded, if it was on them.
func (c *Controller) recovered(ctx context.Context, key cache.ObjectName) {
	if _, ok := c.exhausted.get(key); ok {
		c.exhausted.delete(key)
		klog.FromContext(ctx).Info("Recovered after exhausting retries", "deployment", key)
	}
}

// warnOnce records a Warning Event unless the same message was already
// recorded for key since the Deployment was last valid.
func (c *Controller) warnOnce(key cache.ObjectName, reason, msg string) {
	if !c.warned.swap(key, msg) {
		return
	}
	if d, err := c.deployments.Deployments(key.Namespace).Get(key.Name); err == nil {
		c.recorder.Event(d, corev1.EventTypeWarning, reason, msg)
	}
}

// sync reconciles one Deployment from the informer caches. It returns an
// error only when retrying can help, or a permanentError to report, and
// requeued when it put the key back to wait for its cooldown.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (requeued bool, err error) {
	logger := klog.FromContext(ctx).WithValues("deployment", key)
	d, err := c.deployments.Deployments(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.warned.delete(key)
		c.conflicted.delete(key)
		c.exhausted.delete(key)
		c.forgetWrite(key)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if c.ownWriteNotCached(key, d) {
		// The update event of our own write will enqueue it again.
		logger.V(4).Info("Waiting", "reason", "OwnWriteNotCached", "resourceVersion", d.ResourceVersion)
		return false, nil
	}
	if !managed(d) || d.DeletionTimestamp != nil {
		return false, nil
	}

	maxReplicas, err := c.maxReplicas(d)
	if err != nil {
		return false, err
	}
	selector, err := podSelector(d)
	if err != nil {
		return false, err
	}
	c.warned.delete(key)

	ready, err := c.readyPods(d, selector)
	if err != nil {
		return false, err
	}
	in := PolicyInput{Desired: desiredReplicas(d), Ready: ready, Max: maxReplicas}
	decision := Decide(in)
	if !decision.Scale {
		logger.V(4).Info("No action", "reason", decision.Reason, "desired", in.Desired, "ready", in.Ready, "max", in.Max)
		return false, nil
	}

	// The Deployment controller has not acted on the last spec change yet:
	// its pod counts say nothing about the current spec. Its status update
	// will enqueue the key again.
	if d.Status.ObservedGeneration < d.Generation {
		logger.V(4).Info("Waiting", "reason", "GenerationNotObserved",
			"generation", d.Generation, "observedGeneration", d.Status.ObservedGeneration)
		return false, nil
	}
	if wait := c.cooldownLeft(logger, d); wait > 0 {
		logger.V(4).Info("Waiting", "reason", "Cooldown", "remaining", wait)
		c.queue.AddAfter(key, wait)
		return true, nil
	}
	return false, c.scale(ctx, d, in, decision)
}

// scale writes the decision in one request that carries the resourceVersion
// it was made on: if the Deployment changed since, the server answers 409 and
// the key is retried on fresh state instead of applying a stale decision.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, in PolicyInput, decision Decision) error {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	patch, err := scalePatch(d.ResourceVersion, decision.Target, now)
	if err != nil {
		return err
	}
	_, err = c.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	key := cache.MetaObjectToName(d)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		c.conflicted.set(key, d.ResourceVersion)
		return fmt.Errorf("scaling %s at resourceVersion %s: %w", key, d.ResourceVersion, err)
	case err != nil:
		return fmt.Errorf("scaling %s: %w", key, err)
	}
	c.conflicted.delete(key)
	c.rememberWrite(key, d.ResourceVersion, now)
	c.metrics.scaleActions.Inc()
	logger.Info("Scaled up", "deployment", key, "from", in.Desired, "to", decision.Target, "ready", in.Ready, "max", in.Max)
	c.recorder.Eventf(d, corev1.EventTypeNormal, ReasonScaledUp,
		"Scaled up from %d to %d replicas: %d ready (max %d)", in.Desired, decision.Target, in.Ready, in.Max)
	return nil
}

// ownWrite is a write the cache may not show yet: made on resourceVersion
// from, stamping last-scale at.
type ownWrite struct {
	from string
	at   time.Time
}

func (c *Controller) rememberWrite(key cache.ObjectName, from string, at time.Time) {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	if c.written == nil {
		c.written = map[cache.ObjectName]ownWrite{}
	}
	c.written[key] = ownWrite{from: from, at: at}
}

func (c *Controller) forgetWrite(key cache.ObjectName) {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	delete(c.written, key)
}

// ownWriteNotCached reports whether d predates the scaler's last write to
// it: d is the version that write was made on, or carries an older
// last-scale stamp (another writer's change that came in between). It stops
// waiting after a cooldown, in case the stamp was removed by someone else;
// a decision on stale state would then still meet a 409.
func (c *Controller) ownWriteNotCached(key cache.ObjectName, d *appsv1.Deployment) bool {
	c.writtenMu.Lock()
	defer c.writtenMu.Unlock()
	w, ok := c.written[key]
	if !ok {
		return false
	}
	stale := false
	switch stamp := d.Annotations[AnnotationLastScale]; {
	case w.from != "" && d.ResourceVersion == w.from:
		stale = true // the very version the write was decided on
	case stamp == w.at.UTC().Format(time.RFC3339Nano):
		stale = false // the cache shows the write
	case stamp == "":
		stale = true // older than the write, or its stamp was removed since
	default:
		t, err := time.Parse(time.RFC3339Nano, stamp)
		stale = err == nil && t.Before(w.at)
	}
	if stale && c.clock.Since(w.at) < c.cfg.Cooldown {
		return true
	}
	delete(c.written, key)
	return false
}

// scalePatch is a JSON merge patch that sets spec.replicas and the
// last-scale annotation, conditional on resourceVersion when it is known.
func scalePatch(resourceVersion string, replicas int32, at time.Time) ([]byte, error) {
	meta := map[string]any{
		"annotations": map[string]string{AnnotationLastScale: at.UTC().Format(time.RFC3339Nano)},
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	return json.Marshal(map[string]any{
		"metadata": meta,
		"spec":     map[string]any{"replicas": replicas},
	})
}

// cooldownLeft is how long the Deployment must still wait after the last
// scale recorded on it. A malformed annotation is logged and ignored: it is
// the scaler's own, and refusing to act on it forever would be worse.
func (c *Controller) cooldownLeft(logger klog.Logger, d *appsv1.Deployment) time.Duration {
	v, ok := d.Annotations[AnnotationLastScale]
	if !ok {
		return 0
	}
	last, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		logger.Info("Ignoring malformed annotation", "annotation", AnnotationLastScale, "value", v, "err", err)
		return 0
	}
	return max(0, last.Add(c.cfg.Cooldown).Sub(c.clock.Now()))
}

func (c *Controller) maxReplicas(d *appsv1.Deployment) (int32, error) {
	v, ok := d.Annotations[AnnotationMaxReplicas]
	if !ok {
		return c.cfg.DefaultMaxReplicas, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, permanentf(ReasonInvalidMaxReplicas,
			"annotation %s=%q is not a positive integer; leaving the Deployment alone", AnnotationMaxReplicas, v)
	}
	return int32(n), nil
}

func podSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil ||
		(len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		return nil, permanentf(ReasonInvalidSelector, "spec.selector is empty; leaving the Deployment alone")
	}
	s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, permanentf(ReasonInvalidSelector, "spec.selector is invalid: %v; leaving the Deployment alone", err)
	}
	return s, nil
}

func managed(d *appsv1.Deployment) bool { return d.Labels[LabelEnabled] == ValueEnabled }

// desiredReplicas is spec.replicas, where nil means 1 as the API defaults it.
func desiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func countReady(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if podReady(p) {
			n++
		}
	}
	return n
}

// podReady: not terminating and condition Ready=True.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// dropManagedFields trims what the scaler never reads before it is cached.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// keyedStrings is a small mutex-guarded map from key to string.
type keyedStrings struct {
	mu sync.Mutex
	m  map[cache.ObjectName]string
}

// swap stores v and reports whether it differs from what was stored.
func (k *keyedStrings) swap(key cache.ObjectName, v string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.m[key]; ok && old == v {
		return false
	}
	if k.m == nil {
		k.m = map[cache.ObjectName]string{}
	}
	k.m[key] = v
	return true
}

func (k *keyedStrings) set(key cache.ObjectName, v string) { k.swap(key, v) }

func (k *keyedStrings) get(key cache.ObjectName) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok
}

func (k *keyedStrings) delete(key cache.ObjectName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}
