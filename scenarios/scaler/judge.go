package scaler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim/world"
)

// The scaler's invariants, as named in violations.
const (
	InvReplicasWithinMax = "replicas-within-max"
	InvNeverScalesDown   = "never-scales-down"
	InvWritesOnlyReplica = "writes-only-replicas-and-own-annotations"
	InvOnlyLabelled      = "writes-only-labelled-deployments"
)

// Wrote judges a successful write of a Deployment (or its scale) by the
// scaler.
func (o *judge) Wrote(w scenarios.Write) {
	if w.GVR.Resource != "deployments" || (w.Subresource != "" && w.Subresource != "scale") {
		return
	}
	switch w.Verb {
	case "patch":
		if len(w.Patch) == 0 {
			return // its body could not be read
		}
		o.checkPatch(w.Request, w.PatchType, w.Patch)
	case "update":
		if w.Subresource != "" || w.Object == nil {
			return
		}
		var d appsv1.Deployment
		if raw, err := json.Marshal(w.Object); err == nil && json.Unmarshal(raw, &d) == nil {
			o.checkUpdate(w.Request, &d)
		}
	}
}

// judge watches the run's Deployments and pods through the harness's
// unfaulted client, checks the scaler's invariants on every change and
// write, and judges the policy's fixed point.
type judge struct {
	v       scenarios.View
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

// NewJudge returns the scaler's judge for one run.
func NewJudge() scenarios.Judge {
	return &judge{
		stopCh:   make(chan struct{}),
		versions: map[string]map[string]*appsv1.Deployment{},
		latest:   map[string]*appsv1.Deployment{},
		states:   map[string]deploymentState{},
		replicas: map[string][]int32{},
	}
}

// Invariants are the scaler's.
func (o *judge) Invariants() []string {
	return []string{InvReplicasWithinMax, InvNeverScalesDown, InvWritesOnlyReplica, InvOnlyLabelled}
}

// Start watches the run's Deployments and pods.
func (o *judge) Start(ctx context.Context, v scenarios.View) error {
	o.v = v
	o.factory = informers.NewSharedInformerFactoryWithOptions(v.Client, 0, informers.WithNamespace(v.Namespace))
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

// Stop ends the informers.
func (o *judge) Stop() {
	close(o.stopCh)
	o.factory.Shutdown()
}

func (o *judge) deployment(typ string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	now := time.Now()
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
			o.breach(InvReplicasWithinMax, now, d.Name, nil, fmt.Sprintf("%s has %d replicas, above its max %d", d.Name, desired(d), m))
		}
		if prev != nil && desired(d) < desired(prev) {
			o.breach(InvNeverScalesDown, now, d.Name, nil, fmt.Sprintf("%s went from %d to %d replicas", d.Name, desired(prev), desired(d)))
		}
	}
	o.update(d.Name, now)
}

func (o *judge) pod(typ string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	o.v.Event(reports.WatchEvent{At: now, Type: typ, Resource: "pods", Name: p.Name, RV: p.ResourceVersion})
	if app := p.Labels["app"]; app != "" {
		o.update(app, now)
	}
}

// update recomputes a managed Deployment's state and records it if it
// changed.
func (o *judge) update(name string, now time.Time) {
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
		if world.PodReady(p) {
			st.Ready++
		}
	}
	o.mu.Lock()
	changed := o.states[name] != st
	o.states[name] = st
	o.mu.Unlock()
	if changed {
		o.v.State(reports.State{At: now, Deployment: name, Desired: st.Desired, Ready: st.Ready, Pods: st.Pods, Max: st.Max})
	}
}

func (o *judge) state(name string) (deploymentState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, ok := o.states[name]
	return st, ok
}

// version is the Deployment as it was at resourceVersion rv, or the latest
// seen when rv is empty.
func (o *judge) version(name, rv string) (*appsv1.Deployment, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if rv == "" {
		d, ok := o.latest[name]
		return d, ok
	}
	d, ok := o.versions[name][rv]
	return d, ok
}

// Needed is, per managed Deployment, how many replica changes it went
// through: the writes its history needed.
func (o *judge) Needed() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for name := range o.states {
		out["deployments/"+name] = max(len(o.replicas[name])-1, 0)
	}
	return out
}

// Goal: every managed Deployment at the policy's fixed point.
func (o *judge) Goal() (bool, string) {
	o.mu.Lock()
	names := make([]string, 0, len(o.states))
	for name := range o.states {
		names = append(names, name)
	}
	o.mu.Unlock()
	sort.Strings(names)
	// Only the first few are told: formatting every one of a thousand
	// Deployments on each judgement costs more than judging them.
	const told = 3
	var off []string
	n := 0
	for _, name := range names {
		st, _ := o.state(name)
		switch {
		case st.Desired >= st.Max:
		case 2*st.Ready >= st.Desired && st.Pods == st.Desired && st.Settled:
		default:
			if n++; n <= told {
				off = append(off, fmt.Sprintf("%s: %d replicas, %d pods, %d ready, max %d", name, st.Desired, st.Pods, st.Ready, st.Max))
			}
		}
	}
	if n > 0 {
		more := ""
		if n > told {
			more = fmt.Sprintf(" (and %d more)", n-told)
		}
		return false, "not at the policy's fixed point: " + strings.Join(off, "; ") + more
	}
	return true, ""
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

// breach records a broken invariant of the scaler's about the Deployment
// name, after the request q where there is one.
func (o *judge) breach(invariant string, at time.Time, name string, q *reports.Request, detail string) {
	f := reports.Finding{Check: invariant, Kind: reports.KindInvariant, At: at, Detail: detail,
		Subject: reports.Subject{Group: "apps", Resource: "deployments", Namespace: o.v.Namespace, Name: name}}
	if q != nil {
		f.Request = new(*q)
	}
	o.v.Find(f)
}

// checkPatch judges a successful patch of a Deployment by the controller.
func (o *judge) checkPatch(q reports.Request, pt types.PatchType, patch []byte) {
	var doc any
	if err := json.Unmarshal(patch, &doc); err != nil {
		o.breach(InvWritesOnlyReplica, q.At, q.Name, &q, "a patch that is not JSON: "+string(patch))
		return
	}
	var paths []string
	var replicas *int64
	var rv string
	switch p := doc.(type) {
	case []any: // JSON patch
		for _, op := range p {
			m, _ := op.(map[string]any)
			path, _ := m["path"].(string)
			paths = append(paths, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "."))
			if path == "/spec/replicas" {
				if v, ok := m["value"].(float64); ok {
					n := int64(v)
					replicas = &n
				}
			}
		}
	case map[string]any: // merge and strategic merge patches
		leaves("", p, &paths)
		if spec, ok := p["spec"].(map[string]any); ok {
			if v, ok := spec["replicas"].(float64); ok {
				n := int64(v)
				replicas = &n
			}
		}
		if md, ok := p["metadata"].(map[string]any); ok {
			rv, _ = md["resourceVersion"].(string)
		}
	}
	for _, path := range paths {
		if !allowedPath(path) {
			o.breach(InvWritesOnlyReplica, q.At, q.Name, &q, fmt.Sprintf("the controller's %s patch of %s sets %s", pt, q.Name, path))
		}
	}
	base, ok := o.version(q.Name, rv)
	if !ok {
		return
	}
	o.checkBase(q, base, replicas)
}

// checkUpdate judges a successful update of a Deployment by the
// controller, against the version it was based on.
func (o *judge) checkUpdate(q reports.Request, d *appsv1.Deployment) {
	base, ok := o.version(q.Name, d.ResourceVersion)
	if !ok {
		return
	}
	var replicas *int64
	if d.Spec.Replicas != nil {
		n := int64(*d.Spec.Replicas)
		replicas = &n
	}
	a, b := base.DeepCopy(), d.DeepCopy()
	a.Spec.Replicas, b.Spec.Replicas = nil, nil
	for _, x := range []*appsv1.Deployment{a, b} {
		for k := range x.Annotations {
			if strings.HasPrefix(k, "converge.dev/") {
				delete(x.Annotations, k)
			}
		}
	}
	switch {
	case !apiequality.Semantic.DeepEqual(a.Spec, b.Spec):
		o.breach(InvWritesOnlyReplica, q.At, q.Name, &q, "the controller's update of "+q.Name+" changes its spec beyond replicas")
	case !apiequality.Semantic.DeepEqual(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations):
		o.breach(InvWritesOnlyReplica, q.At, q.Name, &q, "the controller's update of "+q.Name+" changes labels or annotations not its own")
	}
	o.checkBase(q, base, replicas)
}

// checkBase: the write was of a labelled Deployment, and its replicas are
// neither lower than before nor above the max.
func (o *judge) checkBase(q reports.Request, base *appsv1.Deployment, replicas *int64) {
	if base.Labels[controller.LabelEnabled] != controller.ValueEnabled {
		o.breach(InvOnlyLabelled, q.At, q.Name, &q, "the controller wrote "+q.Name+", which does not carry "+controller.LabelEnabled+"="+controller.ValueEnabled)
	}
	if replicas == nil {
		return
	}
	before := int64(1)
	if base.Spec.Replicas != nil {
		before = int64(*base.Spec.Replicas)
	}
	if *replicas < before {
		o.breach(InvNeverScalesDown, q.At, q.Name, &q, fmt.Sprintf("the controller lowered %s from %d to %d replicas", q.Name, before, *replicas))
	}
	if m := maxOf(base); int64(m) < *replicas {
		o.breach(InvReplicasWithinMax, q.At, q.Name, &q, fmt.Sprintf("the controller set %s to %d replicas, above its max %d", q.Name, *replicas, m))
	}
}

func leaves(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		p := join(prefix, k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			leaves(p, sub, out)
			continue
		}
		*out = append(*out, p)
	}
}

func allowedPath(p string) bool {
	switch {
	case p == "spec.replicas", p == "metadata.resourceVersion":
		return true
	case strings.HasPrefix(p, "metadata.annotations."):
		return strings.HasPrefix(strings.TrimPrefix(p, "metadata.annotations."), "converge.dev/")
	}
	return false
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
