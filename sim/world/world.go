// Package world simulates the cluster around a controller: Nodes, and the
// roles nobody else plays on a backend. It plays the kubelet of its own
// simulated Nodes everywhere (pods move to Running and turn ready as a
// readiness Model says; graceful deletion is honoured), the scheduler where
// nothing schedules (fake, envtest: pending pods are bound through the
// binding subresource), and the Deployment and ReplicaSet controllers where
// none runs (fake: pods kept equal to replicas, newest deleted first, a
// changed template rolled out within maxSurge and maxUnavailable, a paused
// Deployment scaled but not rolled, orphans its selector matches adopted,
// status and its Available and Progressing conditions written as
// kube-controller-manager writes them). The store's garbage collector
// removes the pods of a deleted Deployment as its propagation policy says.
//
// It acts through the client it is given (the backend's unfaulted
// observer), reads through informers, and takes time from its clock, so it
// runs the same in a synctest bubble and in real time.
//
// On a real cluster, where the real scheduler places pods, a pod lands on a
// simulated Node only if its template carries Placement's toleration and
// node selector; KeepNodesAlive keeps the Nodes Ready there.
//
// The fake world's Deployments are checked against kube-controller-manager
// by a differential test (generated workloads: scaling, deletes with each
// propagation policy, recreation under the same name, template changes,
// pause and resume, pods deleted behind its back, orphans adopted), which
// compares the settled state a controller can observe: each workload's end
// against a model of what it implies, and, for the sample run on envtest,
// the fake world's end against kube-controller-manager's directly. make
// test runs 200 workloads on fake and 3 on envtest; make test-full 1,000
// and 24 (TestWorldDifferentialFake, TestWorldDifferentialEnvtest). The
// store's garbage collector and namespace deletion have a differential of
// their own in package sim (owners and dependents, each propagation policy,
// finalizers, the namespace's deletion): 1,000 sequences on fake and 3 on
// envtest in make test, 5,000 and 24 in make test-full, each against its
// model. Known differences, each kept out of that comparison on purpose:
//   - no ReplicaSets on fake: pods are owned by their Deployment directly
//     (the test follows a pod's owners to its Deployment on both sides), so
//     no revision history, rollback or deployment.kubernetes.io/revision
//     annotation; pods left by an orphaning delete are the pods alive at
//     that instant and nothing keeps their count, where a real orphaned
//     ReplicaSet keeps its replicas (the test orphans settled Deployments);
//   - a paused Deployment scales on the template of its newest pod or the
//     template it last rolled out, where the real one scales its
//     ReplicaSets proportionally;
//   - the rollout is a simplified rolling update: within maxSurge and
//     maxUnavailable, unready old pods first, but not the real controller's
//     exact sequence of steps; intermediate states differ, the end does not;
//   - pod names end in a count (the store's generated names) after the
//     template hash, not random letters; the hash is not the real one.
//
// What it does not do: no resource requests or node affinity in
// scheduling; no ReplicaSets, StatefulSets, DaemonSets or Jobs of their
// own (a ReplicaSet created on fake gets no pods).
package world

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
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
	// rolled is the template each Deployment (by UID) last rolled out,
	// as its newest ReplicaSet holds it: what it scales while paused.
	rolled map[types.UID]rolled
}

type rolled struct {
	template *corev1.PodTemplateSpec
	hash     string
}

// pending are the pods the world created or deleted for one Deployment
// and has not seen so yet, as the ReplicaSet controller's expectations
// are: kept for the Deployment's UID, so one created again under its name
// starts with none.
type pending struct {
	uid              types.UID
	created, deleted map[string]bool
	// creating counts the creates on their way: the events of a pod
	// can come before its create returns, even its deletion's. early
	// holds the names of the pods of events that came meanwhile, so a
	// pod already seen, and maybe gone, is not waited for.
	creating int
	early    map[string]bool
}

type key struct {
	kind string // "pod" or "deployment"
	name string
}

const (
	podsByNode       = "converge.dev/pods-by-node"
	podsByDeployment = "converge.dev/pods-by-deployment" // the controlling Deployment's name, or orphan
	// orphan files the pods without a controller: no Deployment's name
	// (it is no DNS label), for adopt.
	orphan = "<orphan>"
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
	w := &World{cfg: cfg, clock: cfg.Clock, placed: map[string]int{}, nodeOf: map[string]string{}, rolled: map[types.UID]rolled{}}
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
				owner := metav1.GetControllerOf(p)
				switch {
				case owner == nil:
					return []string{orphan}, nil
				case owner.Kind == "Deployment":
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
			if e.creating > 0 {
				e.early[p.Name] = true
			}
		}
		w.mu.Unlock()
		w.queue.Add(key{"deployment", owner.Name})
	} else if owner == nil && w.cfg.Deployments {
		// An orphan: a Deployment whose selector matches adopts it.
		w.enqueueSelecting(p)
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

// enqueueSelecting queues the Deployments whose selector matches p.
func (w *World) enqueueSelecting(p *corev1.Pod) {
	deps, err := w.deployments.Deployments(w.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range deps {
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && !s.Empty() && s.Matches(labels.Set(p.Labels)) {
			w.queue.Add(key{"deployment", d.Name})
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
		// Deleted at the end from before its creation on, even by a world
		// stopped while starting: a create cut short by the end of ctx may
		// still have been carried out, and a Node left behind on a shared
		// cluster takes the pods of later runs.
		w.mu.Lock()
		w.created = append(w.created, node.Name)
		w.mu.Unlock()
		created, err := w.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = w.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("world: creating node: %w", err)
		}
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

// syncDeployment plays the Deployment and ReplicaSet controllers on fake,
// with pods owned by their Deployment directly: a pod runs the template
// its pod-template-hash label names, a changed template rolls out within
// maxSurge and maxUnavailable (or recreates, with that strategy), a paused
// Deployment only scales, one being deleted only has its status written,
// and the status is written as kube-controller-manager writes it.
func (w *World) syncDeployment(ctx context.Context, name string) error {
	d, err := w.deployments.Deployments(w.cfg.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Its pods are the garbage collector's (the store plays it), as
		// the propagation policy says: an orphaning delete keeps them.
		w.mu.Lock()
		if e := w.pending[name]; e != nil {
			delete(w.rolled, e.uid)
		}
		delete(w.pending, name)
		w.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	if d.DeletionTimestamp == nil {
		if err := w.adopt(ctx, d); err != nil {
			return err
		}
	}
	all, err := w.podsOf(d.Name)
	if err != nil {
		return err
	}
	exp := w.expectations(d)
	seen := map[string]bool{}
	for _, p := range all {
		if owner := metav1.GetControllerOf(p); owner != nil && owner.UID == d.UID {
			seen[p.Name] = p.DeletionTimestamp == nil
		}
	}
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

	hash := TemplateHash(&d.Spec.Template)
	now := w.clock.Now()
	minReady := time.Duration(d.Spec.MinReadySeconds) * time.Second
	var set podSet
	set.sort(all, d.UID, hash, deleting)
	if d.DeletionTimestamp == nil {
		if err := w.manage(ctx, d, hash, &set, created, exp); err != nil {
			return err
		}
	}
	status := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            int32(len(set.cur) + len(set.old)),
		UpdatedReplicas:     int32(len(set.cur)),
		TerminatingReplicas: ptr.To(set.terminating),
		CollisionCount:      d.Status.CollisionCount,
	}
	var nextAvailable time.Duration
	for _, p := range slices.Concat(set.cur, set.old) {
		if !PodReady(p) {
			continue
		}
		status.ReadyReplicas++
		if wait := readySince(p).Add(minReady).Sub(now); wait > 0 {
			if nextAvailable == 0 || wait < nextAvailable {
				nextAvailable = wait
			}
			continue
		}
		status.AvailableReplicas++
	}
	if nextAvailable > 0 {
		w.queue.AddAfter(key{"deployment", d.Name}, nextAvailable)
	}
	// Pods created just now are not in the cache yet: they count as
	// unavailable, as their ReplicaSet's replicas do.
	status.UnavailableReplicas = max(0, status.Replicas+int32(created)-status.AvailableReplicas)
	status.Conditions = w.conditions(d, &status, now)
	if semantic.Equal(&d.Status, &status) {
		return nil
	}
	update := d.DeepCopy()
	update.Status = status
	_, err = w.cfg.Client.AppsV1().Deployments(w.cfg.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	return err
}

// podSet is a Deployment's pods: live ones on its current template (cur)
// and on an older one (old), each newest first, and the count of those
// being deleted.
type podSet struct {
	cur, old    []*corev1.Pod
	terminating int32
}

// sort files the pods d (uid) controls; deleting are those the world has
// deleted and the cache still shows alive.
func (s *podSet) sort(all []*corev1.Pod, uid types.UID, hash string, deleting map[string]bool) {
	for _, p := range all {
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != uid {
			continue
		}
		switch {
		case p.DeletionTimestamp != nil || deleting[p.Name]:
			s.terminating++
		case p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash:
			s.cur = append(s.cur, p)
		default:
			s.old = append(s.old, p)
		}
	}
	newestFirst := func(a, b *corev1.Pod) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return compareStrings(b.Name, a.Name)
	}
	slices.SortFunc(s.cur, newestFirst)
	slices.SortFunc(s.old, newestFirst)
}

// manage creates and deletes d's pods for one step of its rollout, and
// leaves in set the live pods after it.
func (w *World) manage(ctx context.Context, d *appsv1.Deployment, hash string, set *podSet, created int, exp *pending) error {
	want := int(ptr.Deref(d.Spec.Replicas, 1))
	pods := w.cfg.Client.CoreV1().Pods(w.cfg.Namespace)
	create := func(n int, t *corev1.PodTemplateSpec, hash string) error {
		for range n {
			w.mu.Lock()
			exp.creating++
			w.mu.Unlock()
			p, err := pods.Create(ctx, podFor(d, t, hash), metav1.CreateOptions{})
			w.mu.Lock()
			if exp.creating--; err == nil && !exp.early[p.Name] {
				exp.created[p.Name] = true
			}
			if exp.creating == 0 {
				clear(exp.early)
			}
			w.mu.Unlock()
			if err != nil {
				return err
			}
		}
		return nil
	}
	del := func(from *[]*corev1.Pod, n int, pick func(*corev1.Pod) bool) error {
		kept := (*from)[:0:0]
		for _, p := range *from {
			if n <= 0 || !pick(p) {
				kept = append(kept, p)
				continue
			}
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			w.mu.Lock()
			exp.deleted[p.Name] = true
			w.mu.Unlock()
			set.terminating++
			n--
		}
		*from = kept
		return nil
	}
	anyPod := func(*corev1.Pod) bool { return true }
	unready := func(p *corev1.Pod) bool { return !PodReady(p) }
	live := len(set.cur) + len(set.old) + created

	if !d.Spec.Paused {
		w.mu.Lock()
		w.rolled[d.UID] = rolled{d.Spec.Template.DeepCopy(), hash}
		w.mu.Unlock()
	}
	switch {
	case d.Spec.Paused || len(set.old) == 0:
		// No rollout: scale. A paused Deployment's new pods are like its
		// newest, or on the template it last rolled out (its ReplicaSets
		// keep their templates), and none if it never rolled one out; the
		// newest go first.
		if diff := want - live; diff > 0 {
			t, h := &d.Spec.Template, hash
			if d.Spec.Paused {
				w.mu.Lock()
				last, ok := w.rolled[d.UID]
				w.mu.Unlock()
				t, h = last.template, last.hash
				if newest := slices.Concat(set.cur, set.old); len(newest) > 0 {
					t, h = templateOf(newest[0]), newest[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
				} else if !ok {
					return nil
				}
			}
			return create(diff, t, h)
		} else if diff < 0 {
			if err := del(&set.cur, -diff, anyPod); err != nil {
				return err
			}
			return del(&set.old, len(set.cur)+len(set.old)+created-want, anyPod)
		}
		return nil
	case d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType:
		// Every old pod goes before a new one is made.
		return del(&set.old, len(set.old), anyPod)
	}
	surge, unavailable := fenceposts(d, int32(want))
	if n := min(want-len(set.cur)-created, want+int(surge)-live); n > 0 {
		if err := create(n, &d.Spec.Template, hash); err != nil {
			return err
		}
	}
	if extra := len(set.cur) + created - want; extra > 0 {
		if err := del(&set.cur, extra, anyPod); err != nil {
			return err
		}
	}
	// Old pods go as far as availability allows, unready ones first.
	minAvailable := want - int(unavailable)
	readyCur := 0
	for _, p := range set.cur {
		if PodReady(p) {
			readyCur++
		}
	}
	maxDown := len(set.old) + readyCur - minAvailable
	before := len(set.old)
	if err := del(&set.old, max(0, maxDown), unready); err != nil {
		return err
	}
	ready := readyCur + len(set.old)
	return del(&set.old, max(0, min(maxDown-(before-len(set.old)), ready-minAvailable)), anyPod)
}

// fenceposts are d's maxSurge and maxUnavailable for want replicas, with
// the API server's defaults (25% each), as the Deployment controller
// resolves them.
func fenceposts(d *appsv1.Deployment, want int32) (surge, unavailable int32) {
	quarter := intstr.FromString("25%")
	maxSurge, maxUnavailable := &quarter, &quarter
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		maxSurge = cmp.Or(ru.MaxSurge, maxSurge)
		maxUnavailable = cmp.Or(ru.MaxUnavailable, maxUnavailable)
	}
	s, err1 := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(want), true)
	u, err2 := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(want), false)
	if err1 != nil || err2 != nil {
		return 0, 1
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(min(u, int(want)))
}

// Condition reasons, as kube-controller-manager writes them.
const (
	reasonAvailable   = "MinimumReplicasAvailable"
	reasonUnavailable = "MinimumReplicasUnavailable"
	reasonCreated     = "NewReplicaSetCreated"
	reasonUpdated     = "ReplicaSetUpdated"
	reasonComplete    = "NewReplicaSetAvailable"
	reasonTimedOut    = "ProgressDeadlineExceeded"
	reasonPaused      = "DeploymentPaused"
)

// conditions are d's Available and Progressing conditions for status, as
// the Deployment controller sets them: Available once enough replicas are
// available, Progressing while a rollout makes progress, complete, paused,
// or past its progress deadline (600s unless the spec says otherwise,
// as the API server defaults it).
func (w *World) conditions(d *appsv1.Deployment, status *appsv1.DeploymentStatus, now time.Time) []appsv1.DeploymentCondition {
	conds := slices.Clone(d.Status.Conditions)
	set := func(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) {
		c := appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg,
			LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
		i := slices.IndexFunc(conds, func(c appsv1.DeploymentCondition) bool { return c.Type == t })
		if i < 0 {
			conds = append(conds, c)
			return
		}
		if conds[i].Status == s && conds[i].Reason == reason {
			return
		}
		if conds[i].Status == s {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		conds[i] = c
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	_, unavailable := fenceposts(d, want)
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		unavailable = 0
	}
	if status.AvailableReplicas >= want-unavailable {
		set(appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonAvailable, "Deployment has minimum availability.")
	} else {
		set(appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonUnavailable, "Deployment does not have minimum availability.")
	}

	deadline := time.Duration(ptr.Deref(d.Spec.ProgressDeadlineSeconds, 600)) * time.Second
	if d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds == math.MaxInt32 {
		return slices.DeleteFunc(conds, func(c appsv1.DeploymentCondition) bool { return c.Type == appsv1.DeploymentProgressing })
	}
	var cur *appsv1.DeploymentCondition
	if i := slices.IndexFunc(conds, func(c appsv1.DeploymentCondition) bool { return c.Type == appsv1.DeploymentProgressing }); i >= 0 {
		cur = &conds[i]
	}
	switch {
	case d.Spec.Paused:
		if cur == nil || (cur.Reason != reasonPaused && cur.Reason != reasonTimedOut) {
			set(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused")
		}
	case d.DeletionTimestamp != nil:
	case cur != nil && cur.Reason == reasonComplete && status.Replicas == status.UpdatedReplicas:
	case status.UpdatedReplicas == want && status.Replicas == want && status.AvailableReplicas == want:
		set(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonComplete, fmt.Sprintf("Deployment %q has successfully progressed.", d.Name))
	case cur == nil || cur.Reason == reasonPaused:
		set(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonCreated, fmt.Sprintf("Deployment %q is progressing.", d.Name))
		w.queue.AddAfter(key{"deployment", d.Name}, deadline)
	case status.UpdatedReplicas > d.Status.UpdatedReplicas || status.ReadyReplicas > d.Status.ReadyReplicas ||
		status.AvailableReplicas > d.Status.AvailableReplicas ||
		status.Replicas-status.UpdatedReplicas < d.Status.Replicas-d.Status.UpdatedReplicas:
		// Progress: the deadline starts again.
		c := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: reasonUpdated,
			Message: fmt.Sprintf("Deployment %q is progressing.", d.Name), LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
		if cur.Status == corev1.ConditionTrue {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		w.queue.AddAfter(key{"deployment", d.Name}, deadline)
	case cur.Reason != reasonTimedOut:
		if left := cur.LastUpdateTime.Add(deadline).Sub(now); left > 0 {
			w.queue.AddAfter(key{"deployment", d.Name}, left)
		} else {
			set(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut, fmt.Sprintf("Deployment %q has timed out progressing.", d.Name))
		}
	}
	return conds
}

// readySince is when p last turned ready.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// adopt makes d the controller of the live pods its selector matches that
// have none, as the ReplicaSet controller adopts orphans: the pods an
// orphaning delete of a Deployment of the same name left, say.
func (w *World) adopt(ctx context.Context, d *appsv1.Deployment) error {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || selector.Empty() {
		return nil // the API server refuses both; nothing to adopt
	}
	objs, err := w.podIndex.ByIndex(podsByDeployment, orphan)
	if err != nil {
		return err
	}
	ref := metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	checked := false
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil || !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		if !checked {
			// The cache may not show yet that d is being deleted (an
			// orphaning delete frees its pods before it goes): read it
			// from the API first, as the ReplicaSet controller does.
			fresh, err := w.cfg.Client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != d.UID || fresh.DeletionTimestamp != nil {
				return nil
			}
			checked = true
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"ownerReferences": []*metav1.OwnerReference{ref}, "uid": p.UID,
		}})
		if err != nil {
			return err
		}
		_, err = w.cfg.Client.CoreV1().Pods(w.cfg.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
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
		if ok {
			delete(w.rolled, e.uid)
		}
		e = &pending{uid: d.UID, created: map[string]bool{}, deleted: map[string]bool{}, early: map[string]bool{}}
		w.pending[d.Name] = e
	}
	return e
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

// podFor is a new pod of d on template t, whose hash it is.
func podFor(d *appsv1.Deployment, t *corev1.PodTemplateSpec, hash string) *corev1.Pod {
	lbls := maps.Clone(t.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    d.Name + "-" + hash + "-",
			Namespace:       d.Namespace,
			Labels:          lbls,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

// templateOf is the template p was made from.
func templateOf(p *corev1.Pod) *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations},
		Spec:       *p.Spec.DeepCopy(),
	}
	t.Spec.NodeName = ""
	return t
}

// TemplateHash is the value of the pod-template-hash label the world puts
// on the pods of a template: a short, stable digest of it.
func TemplateHash(t *corev1.PodTemplateSpec) string {
	h := fnv.New32a()
	raw, _ := json.Marshal(t) // a template always encodes
	h.Write(raw)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}
