package zoo

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
)

// The kit is the controller a developer writes by hand from client-go's
// sample controller: informers on Deployments and Pods, a rate-limited
// workqueue, workers, a reconcile that asks the scaler's policy
// (controller.Decide, its public seam) and writes with a merge patch that
// carries the resourceVersion it read, a cooldown kept in the scaler's
// annotation, leader election that releases its Lease, and an orderly
// shutdown. Written correctly it passes the catalogue (the zoo runs it as
// its control); each mutant replaces one of its pieces with its own code,
// and the bug lives there.

// pieces are the parts of the kit a mutant can replace.
type pieces struct {
	// handlers registers the informers' event handlers.
	handlers func(k *kit) error
	// run starts the informers, waits for their caches, runs the workers
	// until ctx ends, then shuts down.
	run func(k *kit, ctx context.Context) error
	// next takes one key from the queue, reconciles it and settles it.
	next func(k *kit, ctx context.Context) bool
	// reconcile brings one Deployment to the policy's decision.
	reconcile func(k *kit, ctx context.Context, key string) error
	// ready counts d's ready pods.
	ready func(k *kit, ctx context.Context, d *appsv1.Deployment) (int32, error)
	// settled says whether d may be scaled now that the policy asks for
	// it; when not, it arranges to look again.
	settled func(k *kit, key string, d *appsv1.Deployment) bool
	// write scales d to target.
	write func(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error
	// releaseOnCancel gives up the Lease when the context ends.
	releaseOnCancel bool
}

func correct() pieces {
	return pieces{handlers: handlers, run: run, next: next, reconcile: reconcile, ready: readyFromCache, settled: settled,
		write: patchReplicas, releaseOnCancel: true}
}

const workers = 2

// kit is one instance.
type kit struct {
	in       scenarios.Instance
	cooldown time.Duration
	p        pieces
	client   kubernetes.Interface

	factory     informers.SharedInformerFactory
	deployments appslisters.DeploymentLister
	pods        corelisters.PodLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]

	// based holds, per key, the resourceVersion the last write was made on:
	// a cache still at that version has not seen the write.
	based sync.Map

	leading    atomic.Bool
	busy       atomic.Int32
	reconciles atomic.Int64
	retries    atomic.Int64
}

// newKit builds an instance with pieces p.
func newKit(in scenarios.Instance, p pieces) (*kit, error) {
	cooldown, err := scaler.Cooldown(in.Settings)
	if err != nil {
		return nil, err
	}
	k := &kit{in: in, p: p, client: in.Client, cooldown: cooldown}
	k.factory = informers.NewSharedInformerFactoryWithOptions(in.Client, 0, informers.WithNamespace(in.Namespace))
	d := k.factory.Apps().V1().Deployments()
	pods := k.factory.Core().V1().Pods()
	k.deployments, k.pods = d.Lister(), pods.Lister()
	k.synced = []cache.InformerSynced{d.Informer().HasSynced, pods.Informer().HasSynced}
	k.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "zoo"})
	if err := p.handlers(k); err != nil {
		return nil, err
	}
	return k, nil
}

// Run runs the instance, with leader election when it has company.
func (k *kit) Run(ctx context.Context) error {
	defer k.queue.ShutDown() // also when it never led
	if k.in.LeaderElection == nil {
		k.leading.Store(true)
		return k.p.run(k, ctx)
	}
	le := k.in.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     k.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: k.in.Identity},
	}
	duration := le.LeaseDuration
	if duration == 0 {
		duration = 15 * time.Second
	}
	// The elector calls OnStartedLeading in a goroutine of its own and does
	// not wait for it; the work runs here instead, on the context it hands
	// over, which it cancels when it stops leading.
	leads := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: duration, RenewDeadline: duration * 2 / 3, RetryPeriod: duration / 6,
		ReleaseOnCancel: k.p.releaseOnCancel,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leads <- ctx },
			OnStoppedLeading: func() { k.leading.Store(false) },
		},
	})
	if err != nil {
		return err
	}
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		elector.Run(ctx)
	}()
	select {
	case lctx := <-leads:
		k.leading.Store(true)
		err := k.p.run(k, lctx)
		<-elected
		return err
	case <-elected:
		return nil
	}
}

// Probe shows the instance's inside to the harness.
func (k *kit) Probe() scenarios.Probe {
	return scenarios.Probe{Leading: k.leading.Load(), QueueDepth: k.queue.Len(), Busy: k.busy.Load() > 0,
		Reconciles: k.reconciles.Load(), Retries: k.retries.Load(), CountsRetries: true}
}

func handlers(k *kit) error {
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	_, err := k.factory.Apps().V1().Deployments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, c := old.(*appsv1.Deployment), cur.(*appsv1.Deployment)
			if o.ResourceVersion != c.ResourceVersion {
				enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				k.queue.Add(key)
			}
		},
	})
	if err != nil {
		return err
	}
	_, err = k.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.enqueueOwner(obj) },
		UpdateFunc: func(_, cur any) { k.enqueueOwner(cur) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			k.enqueueOwner(obj)
		},
	})
	return err
}

// enqueueOwner enqueues the Deployments whose selector matches the pod.
func (k *kit) enqueueOwner(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ds, err := k.deployments.Deployments(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err == nil && sel.Matches(labels.Set(pod.Labels)) {
			k.queue.Add(d.Namespace + "/" + d.Name)
		}
	}
}

func run(k *kit, ctx context.Context) error {
	defer k.queue.ShutDown()
	k.factory.Start(ctx.Done())
	defer k.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced...) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k.p.next(k, ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

// take waits for the next key and counts its reconcile. release marks it
// Done and no longer busy; every path must call it, as every path of a
// workqueue consumer must call Done.
func (k *kit) take() (key string, release func(), ok bool) {
	key, quit := k.queue.Get()
	if quit {
		return "", nil, false
	}
	k.busy.Add(1)
	k.reconciles.Add(1)
	return key, func() {
		k.busy.Add(-1)
		k.queue.Done(key)
	}, true
}

func next(k *kit, ctx context.Context) bool {
	key, release, ok := k.take()
	if !ok {
		return false
	}
	defer release()
	if err := k.p.reconcile(k, ctx, key); err != nil {
		// Retried for as long as it fails, the backoff capped at 1000 s by
		// the default rate limiter: dropping it would leave a Deployment
		// nobody changes unreconciled, for want of an event.
		k.retries.Add(1)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func reconcile(k *kit, ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	d, err := k.deployments.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.based.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	if rv, ok := k.based.Load(key); ok && rv == d.ResourceVersion {
		return nil // the cache has not seen our last write; its event comes
	}
	if d.Labels[controller.LabelEnabled] != controller.ValueEnabled || d.DeletionTimestamp != nil {
		return nil
	}
	maxReplicas, err := maxOf(d)
	if err != nil {
		return nil
	}
	ready, err := k.p.ready(k, ctx, d)
	if err != nil {
		return err
	}
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	decision := controller.Decide(controller.PolicyInput{Desired: desired, Ready: ready, Max: maxReplicas})
	if !decision.Scale || !k.p.settled(k, key, d) {
		return nil
	}
	return k.p.write(k, ctx, d, decision.Target)
}

// settled waits for the Deployment controller to act on the last change
// (its status event enqueues the key again) and for the cooldown, so new
// pods get the time to become ready before the next doubling.
func settled(k *kit, key string, d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	if left := k.cooldownLeft(d); left > 0 {
		k.queue.AddAfter(key, left)
		return false
	}
	return true
}

func maxOf(d *appsv1.Deployment) (int32, error) {
	v, ok := d.Annotations[controller.AnnotationMaxReplicas]
	if !ok {
		return 10, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, errors.New("bad max-replicas")
	}
	return int32(n), nil
}

func (k *kit) cooldownLeft(d *appsv1.Deployment) time.Duration {
	t, err := time.Parse(time.RFC3339Nano, d.Annotations[controller.AnnotationLastScale])
	if err != nil {
		return 0
	}
	return k.cooldown - time.Since(t)
}

func readyFromCache(k *kit, _ context.Context, d *appsv1.Deployment) (int32, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return 0, err
	}
	pods, err := k.pods.Pods(d.Namespace).List(sel)
	if err != nil {
		return 0, err
	}
	return countReady(pods), nil
}

func countReady(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// scalePatch sets spec.replicas and the last-scale stamp; with rv, the
// server refuses it (409) if the Deployment changed since it was read.
func scalePatch(rv string, target int32) []byte {
	meta := map[string]any{"annotations": map[string]string{controller.AnnotationLastScale: time.Now().UTC().Format(time.RFC3339Nano)}}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{"replicas": target}})
	return b
}

func patchReplicas(k *kit, ctx context.Context, d *appsv1.Deployment, target int32) error {
	_, err := k.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, scalePatch(d.ResourceVersion, target), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	k.based.Store(d.Namespace+"/"+d.Name, d.ResourceVersion)
	return nil
}
