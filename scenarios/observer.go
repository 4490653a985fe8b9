package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/reports"
)

// observer is the harness's god view: an unfaulted client's informers on
// the run's Deployments and pods. It records what it sees and checks the
// invariants that can be seen from outside on every change.
type observer struct {
	r       *run
	factory informers.SharedInformerFactory
	pods    cache.Indexer
	stopCh  chan struct{}

	mu       sync.Mutex
	versions map[string]map[string]*appsv1.Deployment // name -> resourceVersion -> object
	latest   map[string]*appsv1.Deployment
	states   map[string]deploymentState
	replicas map[string][]int32 // distinct replica values in order, per Deployment
}

type deploymentState struct {
	Desired, Ready, Pods, Max int32
	// Settled: no pod is pending scheduling or terminating.
	Settled bool
}

const podsByApp = "converge.dev/pods-by-app"

func newObserver(client kubernetes.Interface, namespace string, r *run) *observer {
	return &observer{
		r:        r,
		factory:  informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace)),
		stopCh:   make(chan struct{}),
		versions: map[string]map[string]*appsv1.Deployment{},
		latest:   map[string]*appsv1.Deployment{},
		states:   map[string]deploymentState{},
		replicas: map[string][]int32{},
	}
}

func (o *observer) start(ctx context.Context) error {
	deps := o.factory.Apps().V1().Deployments().Informer()
	pods := o.factory.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{podsByApp: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels["app"] != "" {
			return []string{p.Labels["app"]}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	o.pods = pods.GetIndexer()
	if _, err := deps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.deployment("ADDED", obj) },
		UpdateFunc: func(_, obj any) { o.deployment("MODIFIED", obj) },
		DeleteFunc: func(obj any) { o.deployment("DELETED", obj) },
	}); err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.pod("ADDED", obj) },
		UpdateFunc: func(_, obj any) { o.pod("MODIFIED", obj) },
		DeleteFunc: func(obj any) { o.pod("DELETED", obj) },
	}); err != nil {
		return err
	}
	o.factory.Start(o.stopCh)
	for typ, ok := range o.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("observer: %v cache did not sync", typ)
		}
	}
	return nil
}

func (o *observer) stop() {
	close(o.stopCh)
	o.factory.Shutdown()
}

func (o *observer) deployment(typ string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	now := time.Now()
	o.r.hist.event(reports.WatchEvent{At: now, Type: typ, Resource: "deployments", Name: d.Name, RV: d.ResourceVersion})
	o.mu.Lock()
	prev := o.latest[d.Name]
	if typ == "DELETED" {
		delete(o.latest, d.Name)
	} else {
		o.latest[d.Name] = d
		if o.versions[d.Name] == nil {
			o.versions[d.Name] = map[string]*appsv1.Deployment{}
		}
		o.versions[d.Name][d.ResourceVersion] = d
		if n := desired(d); len(o.replicas[d.Name]) == 0 || o.replicas[d.Name][len(o.replicas[d.Name])-1] != n {
			o.replicas[d.Name] = append(o.replicas[d.Name], n)
		}
	}
	o.mu.Unlock()
	if typ != "DELETED" && d.Labels[controller.LabelEnabled] == controller.ValueEnabled {
		if m := maxOf(d); desired(d) > m {
			o.r.hist.violate(InvReplicasWithinMax, now, d.Name, "", fmt.Sprintf("%s has %d replicas, above its max %d", d.Name, desired(d), m))
		}
		if prev != nil && desired(d) < desired(prev) {
			o.r.hist.violate(InvNeverScalesDown, now, d.Name, "", fmt.Sprintf("%s went from %d to %d replicas", d.Name, desired(prev), desired(d)))
		}
	}
	o.update(d.Name, now)
}

func (o *observer) pod(typ string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	o.r.hist.event(reports.WatchEvent{At: now, Type: typ, Resource: "pods", Name: p.Name, RV: p.ResourceVersion})
	if app := p.Labels["app"]; app != "" {
		o.update(app, now)
	}
}

// update recomputes a managed Deployment's state and records it if it
// changed.
func (o *observer) update(name string, now time.Time) {
	o.mu.Lock()
	d := o.latest[name]
	o.mu.Unlock()
	if d == nil || d.Labels[controller.LabelEnabled] != controller.ValueEnabled {
		return
	}
	st := deploymentState{Desired: desired(d), Max: maxOf(d), Settled: true}
	objs, _ := o.pods.ByIndex(podsByApp, name)
	for _, obj := range objs {
		p := obj.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			st.Settled = false
			continue
		}
		st.Pods++
		if p.Spec.NodeName == "" {
			st.Settled = false
		}
		if podReady(p) {
			st.Ready++
		}
	}
	o.mu.Lock()
	changed := o.states[name] != st
	o.states[name] = st
	o.mu.Unlock()
	if changed {
		o.r.hist.state(reports.State{At: now, Deployment: name, Desired: st.Desired, Ready: st.Ready, Pods: st.Pods, Max: st.Max})
	}
}

func (o *observer) state(name string) (deploymentState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, ok := o.states[name]
	return st, ok
}

// version is the Deployment as it was at resourceVersion rv, or the latest
// seen when rv is empty.
func (o *observer) version(name, rv string) (*appsv1.Deployment, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if rv == "" {
		d, ok := o.latest[name]
		return d, ok
	}
	d, ok := o.versions[name][rv]
	return d, ok
}

// changes is how many replica changes the Deployment went through: the
// writes its history needed.
func (o *observer) changes(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return max(len(o.replicas[name])-1, 0)
}

func desired(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func maxOf(d *appsv1.Deployment) int32 {
	if v, err := strconv.ParseInt(d.Annotations[controller.AnnotationMaxReplicas], 10, 32); err == nil && v > 0 {
		return int32(v)
	}
	return controller.DefaultMaxReplicas
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
