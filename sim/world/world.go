// Package world simulates the cluster around a controller: Nodes, and the
// roles nobody else plays on a backend. It plays the kubelet of its own
// simulated Nodes everywhere (pods move to Running and turn ready as a
// readiness Model says; graceful deletion is honoured), the scheduler where
// nothing schedules (fake, envtest: pending pods are bound through the
// binding subresource), and the Deployment controller where none runs
// (fake: pods kept equal to replicas, owner references, newest deleted
// first, status written, pods of a deleted Deployment removed).
//
// It acts through the client it is given (the backend's unfaulted
// observer), reads through informers, and takes time from its clock, so it
// runs the same in a synctest bubble and in real time.
//
// On a real cluster, where the real scheduler places pods, a pod lands on a
// simulated Node only if its template carries Placement's toleration and
// node selector; KeepNodesAlive keeps the Nodes Ready there.
//
// What it does not do: no ReplicaSets on fake (pods are owned by their
// Deployment directly), no rolling updates (a template change does not
// replace pods), no resource requests or node affinity in scheduling.
package world

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/internal/semantic"
)

// Labels and taints on simulated Nodes.
const (
	LabelRun     = sim.LabelRun
	TaintSimNode = "converge.dev/simulated"
)

// Config configures a World.
type Config struct {
	// Client acts on the cluster. Required; use an unfaulted one.
	Client kubernetes.Interface
	// Namespace whose pods and Deployments the world plays for. Required.
	Namespace string
	// Nodes is the number of simulated Nodes. Zero means 3.
	Nodes int
	// PodsPerNode is each Node's pod capacity. Zero means 110.
	PodsPerNode int
	// Readiness is the readiness model. Zero means ready after 2s.
	Readiness Model
	// Seed draws the model's per-pod randomness.
	Seed int64
	// Scheduler: bind pending pods (fake, envtest).
	Scheduler bool
	// Deployments: play the Deployment controller (fake only).
	Deployments bool
	// KeepNodesAlive renews each Node's Ready heartbeat and its Lease in
	// kube-node-lease every 10s, as a kubelet does, so a node lifecycle
	// controller (a real cluster's) does not mark the Nodes NotReady and
	// evict their pods.
	KeepNodesAlive bool
	// Untainted leaves the Nodes without the converge.dev/simulated taint,
	// so a real scheduler places any pod there: on a cluster that has no
	// other Nodes (a kwokctl one).
	Untainted bool
	// PodsByStage leaves the pods' kubelet part (status, readiness, the
	// final delete) to another actor: kwok's Stages (kwok.PodStages). The
	// world still creates Nodes and, if asked, schedules.
	PodsByStage bool
	// NodesByStage leaves the Nodes' status to another actor (kwok's node
	// stage reports them Ready): the world only creates and deletes them.
	NodesByStage bool
	// Workers process the world's queue. Zero means 4.
	Workers int
	// Clock: nil means the real clock (virtual in a synctest bubble).
	Clock clock.WithTicker
}

// World is a running simulation. Create it with New, run it with Run.
type World struct {
	cfg   Config
	clock clock.WithTicker

	factory     informers.SharedInformerFactory
	pods        corelisters.PodLister
	podIndex    cache.Indexer
	deployments appslisters.DeploymentLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[key]

	mu    sync.Mutex
	nodes []string
	// created are the Nodes created so far, ready or not: deleted at
	// the end.
	created []string
	// pending are the pods each Deployment's sync created or deleted that
	// the cache has not shown yet: counting them avoids creating twice.
	pending map[string]*pending
	// placed counts the cached pods bound to each Node, and nodeOf each
	// such pod's Node, kept from the pod informer's events: the scheduler
	// reads them rather than every Node's pods on each bind.
	placed map[string]int
	nodeOf map[string]string
}

// pending are the pods the world created or deleted for one Deployment
// and has not seen so yet, as the ReplicaSet controller's expectations
// are: kept for the Deployment's UID, so one created again under its name
// starts with none.
type pending struct {
	uid              types.UID
	created, deleted map[string]bool
}

type key struct {
	kind string // "pod" or "deployment"
	name string
}

const (
	podsByNode       = "converge.dev/pods-by-node"
	podsByDeployment = "converge.dev/pods-by-deployment" // the controlling Deployment's name
)

// New validates cfg and prepares a world; it starts nothing.
func New(cfg Config) (*World, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("client is required"))
	}
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if cfg.Nodes < 0 || cfg.PodsPerNode < 0 || cfg.Workers < 0 {
		errs = append(errs, errors.New("nodes, pods per node and workers must not be negative"))
	}
	if cfg.Readiness == (Model{}) {
		cfg.Readiness = Model{Kind: ReadyAfterDelay, Delay: 2 * time.Second}
	}
	if err := cfg.Readiness.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	cfg.Nodes = cmpOr(cfg.Nodes, 3)
	cfg.PodsPerNode = cmpOr(cfg.PodsPerNode, 110)
	cfg.Workers = cmpOr(cfg.Workers, 4)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	w := &World{cfg: cfg, clock: cfg.Clock, placed: map[string]int{}, nodeOf: map[string]string{}}
	w.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace))
	podInformer := w.factory.Core().V1().Pods()
	w.pods = podInformer.Lister()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{
		podsByNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
		podsByDeployment: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "Deployment" {
					return []string{owner.Name}, nil
				}
			}
			return nil, nil
		},
	}); err != nil {
		return nil, err
	}
	w.podIndex = podInformer.Informer().GetIndexer()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.podChanged,
		UpdateFunc: func(_, obj any) { w.podChanged(obj) },
		DeleteFunc: w.podChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.place(obj, false) },
		UpdateFunc: func(_, obj any) { w.place(obj, false) },
		DeleteFunc: func(obj any) { w.place(obj, true) },
	}); err != nil {
		return nil, err
	}
	w.synced = append(w.synced, podInformer.Informer().HasSynced)
	if cfg.Deployments {
		d := w.factory.Apps().V1().Deployments()
		w.deployments = d.Lister()
		enqueue := func(obj any) {
			if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
				w.queue.Add(key{"deployment", name.Name})
			}
		}
		if _, err := d.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
		}); err != nil {
			return nil, err
		}
		w.synced = append(w.synced, d.Informer().HasSynced)
	}
	return w, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Nodes returns the names of the simulated Nodes (after Run has created them).
func (w *World) Nodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.nodes)
}

// Run creates the Nodes, plays its roles until ctx ends, then deletes the
// Nodes. Every goroutine it started has ended when it returns.
func (w *World) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("world")
	ctx = klog.NewContext(ctx, logger)
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[key](5*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[key]{Clock: w.clock})
	defer w.queue.ShutDown()
	defer w.deleteNodes(context.WithoutCancel(ctx))
	if err := w.createNodes(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}

	w.factory.Start(ctx.Done())
	defer w.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return nil
	}
	var workers sync.WaitGroup
	if w.cfg.KeepNodesAlive {
		workers.Go(func() { w.heartbeat(ctx) })
	}
	for range w.cfg.Workers {
		workers.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	workers.Wait()
	return nil
}

func (w *World) next(ctx context.Context) bool {
	k, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(k)
	var err error
	switch k.kind {
	case "pod":
		err = w.syncPod(ctx, k.name)
	case "deployment":
		err = w.syncDeployment(ctx, k.name)
	}
	switch {
	case err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil:
		w.queue.Forget(k)
	default:
		klog.FromContext(ctx).V(2).Info("Retrying", "kind", k.kind, "name", k.name, "err", err)
		w.queue.AddRateLimited(k)
	}
	return true
}

func (w *World) podChanged(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		if t, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
			p, ok = t.Obj.(*corev1.Pod)
		}
		if !ok {
			return
		}
	}
	w.queue.Add(key{"pod", p.Name})
	if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "Deployment" && w.cfg.Deployments {
		// A pod the world created is seen once an event of it arrives, even
		// one that deletes it before a sync finds it in the cache.
		w.mu.Lock()
		if e := w.pending[owner.Name]; e != nil && e.uid == owner.UID {
			delete(e.created, p.Name)
		}
		w.mu.Unlock()
		w.queue.Add(key{"deployment", owner.Name})
	}
	// Capacity-limited readiness depends on the other pods of the node.
	if w.cfg.Readiness.Kind == CapacityLimited && p.Spec.NodeName != "" {
		others, _ := w.podIndex.ByIndex(podsByNode, p.Spec.NodeName)
		for _, o := range others {
			if op, ok := o.(*corev1.Pod); ok && op.Name != p.Name {
				w.queue.Add(key{"pod", op.Name})
			}
		}
	}
}

func (w *World) createNodes(ctx context.Context) error {
	for i := range w.cfg.Nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("%s-node-%d", w.cfg.Namespace, i),
				Labels: map[string]string{LabelRun: w.cfg.Namespace, "type": "converge-simulated"},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: TaintSimNode, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if w.cfg.Untainted {
			node.Spec.Taints = nil
		}
		created, err := w.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = w.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("world: creating node: %w", err)
		}
		// Deleted at the end from its creation on, even by a world
		// stopped while starting.
		w.mu.Lock()
		w.created = append(w.created, node.Name)
		w.mu.Unlock()
		if w.cfg.NodesByStage {
			w.mu.Lock()
			w.nodes = append(w.nodes, node.Name)
			w.mu.Unlock()
			continue
		}
		// On a real cluster another component (a node controller, kwok)
		// may write the Node between its creation and its status: read it
		// again and retry on a conflict, as a kubelet does.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if created == nil {
				if created, err = w.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
					return err
				}
			}
			now := metav1.NewTime(w.clock.Now())
			created.Status = corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(w.cfg.PodsPerNode), resource.DecimalSI)},
				Allocatable: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(w.cfg.PodsPerNode), resource.DecimalSI)},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
			}
			_, err := w.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			created = nil
			return err
		})
		if err != nil {
			return fmt.Errorf("world: node status: %w", err)
		}
		w.mu.Lock()
		w.nodes = append(w.nodes, node.Name)
		w.mu.Unlock()
	}
	return nil
}

// Placement adds to spec what makes a real scheduler put the pod on this
// run's simulated Nodes and nowhere else: a toleration of their taint and a
// node selector on their run label.
func Placement(spec *corev1.PodSpec, namespace string) {
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: TaintSimNode, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	})
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[LabelRun] = namespace
}

// heartbeat renews the Nodes' Ready condition and Leases until ctx ends.
func (w *World) heartbeat(ctx context.Context) {
	t := w.clock.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		for _, name := range w.Nodes() {
			w.renewNode(ctx, name)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (w *World) renewNode(ctx context.Context, name string) {
	logger := klog.FromContext(ctx)
	now := metav1.NewMicroTime(w.clock.Now())
	leases := w.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		logger.V(2).Info("Renewing node lease", "node", name, "err", err)
	}
	node, err := w.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(now.Time)
		}
	}
	if _, err := w.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		logger.V(2).Info("Node heartbeat", "node", name, "err", err)
	}
}

func (w *World) deleteNodes(ctx context.Context) {
	w.mu.Lock()
	created := slices.Clone(w.created)
	w.mu.Unlock()
	for _, n := range created {
		_ = w.cfg.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		if w.cfg.KeepNodesAlive {
			_ = w.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n, metav1.DeleteOptions{})
		}
	}
}

func (w *World) ownNode(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.nodes, name)
}

// syncPod plays the scheduler and the kubelet for one pod.
func (w *World) syncPod(ctx context.Context, name string) error {
	p, err := w.pods.Pods(w.cfg.Namespace).Get(name)
	if err != nil {
		return err
	}
	pods := w.cfg.Client.CoreV1().Pods(w.cfg.Namespace)
	switch {
	case w.cfg.PodsByStage && p.Spec.NodeName != "":
		return nil // kwok's stages play its kubelet
	case p.DeletionTimestamp != nil:
		if p.Spec.NodeName == "" || w.ownNode(p.Spec.NodeName) {
			// The simulated containers stop at once.
			return pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		return nil
	case p.Spec.NodeName == "":
		if !w.cfg.Scheduler {
			return nil
		}
		node := w.pickNode()
		if node == "" {
			return errors.New("no simulated node has room") // retried with backoff
		}
		return pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
	case !w.ownNode(p.Spec.NodeName):
		return nil
	}
	return w.runPod(ctx, p)
}

// pickNode is the Node with the fewest pods and room for one more.
func (w *World) pickNode() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	best, bestCount := "", -1
	for _, n := range w.nodes {
		count := w.placed[n]
		if count >= w.cfg.PodsPerNode {
			continue
		}
		if bestCount < 0 || count < bestCount {
			best, bestCount = n, count
		}
	}
	return best
}

// place follows a pod's Node in placed, as the informer shows it.
func (w *World) place(obj any, deleted bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		if t, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
			p, ok = t.Obj.(*corev1.Pod)
		}
		if !ok {
			return
		}
	}
	node := p.Spec.NodeName
	if deleted {
		node = ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.nodeOf[p.Name]; old != node {
		if old != "" {
			w.placed[old]--
		}
		if node != "" {
			w.placed[node]++
			w.nodeOf[p.Name] = node
		} else {
			delete(w.nodeOf, p.Name)
		}
	}
}

// runPod writes the status the kubelet would: Running, and ready as the
// model says; it requeues the pod for the model's next change.
func (w *World) runPod(ctx context.Context, p *corev1.Pod) error {
	now := w.clock.Now()
	started := now
	if p.Status.StartTime != nil {
		started = p.Status.StartTime.Time
	}
	readyOnNode := 0
	if w.cfg.Readiness.Kind == CapacityLimited {
		objs, _ := w.podIndex.ByIndex(podsByNode, p.Spec.NodeName)
		for _, o := range objs {
			if op, ok := o.(*corev1.Pod); ok && op.Name != p.Name && PodReady(op) {
				readyOnNode++
			}
		}
	}
	state := w.cfg.Readiness.State(w.cfg.Seed, p.Name, started, now, readyOnNode)
	status := desiredStatus(p, state, started, now)
	if state.Next > 0 {
		w.queue.AddAfter(key{"pod", p.Name}, state.Next)
	}
	if sameStatus(p.Status, status) {
		return nil
	}
	update := p.DeepCopy()
	update.Status = status
	_, err := w.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	return err
}

func desiredStatus(p *corev1.Pod, s PodState, started, now time.Time) corev1.PodStatus {
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		c := corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(now)}
		for _, old := range p.Status.Conditions {
			if old.Type == t && old.Status == status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	status := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &metav1.Time{Time: started},
		HostIP:    "10.255.0.1",
		PodIP:     "10.254.0.1",
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, s.Ready), cond(corev1.PodReady, s.Ready),
		},
	}
	for _, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: s.Ready, RestartCount: s.Restarts, Started: ptr.To(true)}
		if s.Restarts > 0 && !s.Ready {
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			cs.Started = ptr.To(false)
		} else {
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		}
		status.ContainerStatuses = append(status.ContainerStatuses, cs)
	}
	return status
}

// sameStatus: a and b are semantically equal (apiequality.Semantic: a
// quantity or a time compared by value, not by how it is spelled).
func sameStatus(a, b corev1.PodStatus) bool {
	return semantic.Equal(&a, &b)
}

// PodReady reports whether p has condition Ready=True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// syncDeployment plays the Deployment controller on fake.
func (w *World) syncDeployment(ctx context.Context, name string) error {
	d, err := w.deployments.Deployments(w.cfg.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		w.mu.Lock()
		delete(w.pending, name)
		w.mu.Unlock()
		return w.collect(ctx, name)
	}
	if err != nil {
		return err
	}
	all, err := w.podsOf(d.Name)
	if err != nil {
		return err
	}
	var active []*corev1.Pod
	ready := int32(0)
	seen := map[string]bool{}
	for _, p := range all {
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != d.UID {
			continue
		}
		seen[p.Name] = p.DeletionTimestamp == nil
		if p.DeletionTimestamp != nil {
			continue
		}
		active = append(active, p)
		if PodReady(p) {
			ready++
		}
	}
	exp := w.expectations(d)
	w.mu.Lock() // the pod handler notes what it sees (podChanged)
	for n := range exp.created {
		if _, inCache := seen[n]; inCache {
			delete(exp.created, n)
		}
	}
	for n := range exp.deleted {
		if alive := seen[n]; !alive {
			delete(exp.deleted, n)
		}
	}
	created, deleting := len(exp.created), maps.Clone(exp.deleted)
	w.mu.Unlock()
	expect := func(set map[string]bool, name string) {
		w.mu.Lock()
		set[name] = true
		w.mu.Unlock()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	pods := w.cfg.Client.CoreV1().Pods(w.cfg.Namespace)
	if diff := int(want) - len(active) - created + len(deleting); diff > 0 {
		for range diff {
			p, err := pods.Create(ctx, podFor(d), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			expect(exp.created, p.Name)
		}
	} else if diff < 0 {
		active = slices.DeleteFunc(active, func(p *corev1.Pod) bool { return deleting[p.Name] })
		// Newest first, as the ReplicaSet controller prefers.
		slices.SortFunc(active, func(a, b *corev1.Pod) int {
			if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
				return c
			}
			return compareStrings(b.Name, a.Name)
		})
		n := min(-diff, len(active))
		for _, p := range active[:n] {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			expect(exp.deleted, p.Name)
		}
		active = active[n:]
		ready = 0
		for _, p := range active {
			if PodReady(p) {
				ready++
			}
		}
	}
	status := appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           int32(len(active)),
		UpdatedReplicas:    int32(len(active)),
		ReadyReplicas:      ready,
		AvailableReplicas:  ready,
		// Pods created just now are not in the cache yet: the count
		// converges on the next event.
		UnavailableReplicas: max(0, want-ready),
	}
	if semantic.Equal(&d.Status, &status) {
		return nil
	}
	update := d.DeepCopy()
	update.Status = status
	_, err = w.cfg.Client.AppsV1().Deployments(w.cfg.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	return err
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expectations are d's pending pods; those of an earlier Deployment of its
// name are dropped.
func (w *World) expectations(d *appsv1.Deployment) *pending {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = map[string]*pending{}
	}
	e, ok := w.pending[d.Name]
	if !ok || e.uid != d.UID {
		e = &pending{uid: d.UID, created: map[string]bool{}, deleted: map[string]bool{}}
		w.pending[d.Name] = e
	}
	return e
}

// collect deletes the pods of a Deployment that is gone, as the garbage
// collector does.
func (w *World) collect(ctx context.Context, deployment string) error {
	all, err := w.podsOf(deployment)
	if err != nil {
		return err
	}
	for _, p := range all {
		if p.DeletionTimestamp == nil {
			if err := w.cfg.Client.CoreV1().Pods(w.cfg.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// podsOf returns the cached pods a Deployment of that name controls.
func (w *World) podsOf(deployment string) ([]*corev1.Pod, error) {
	objs, err := w.podIndex.ByIndex(podsByDeployment, deployment)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

func podFor(d *appsv1.Deployment) *corev1.Pod {
	t := d.Spec.Template
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    d.Name + "-",
			Namespace:       d.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}
