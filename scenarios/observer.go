package scenarios

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// observer is the harness's god view of the kinds a scenario names: an
// unfaulted client's informers. It records every change it sees in the
// history, the object with it: the invariants, the write rules and the
// goal are judged on that record (package check).
type observer struct {
	r          *run
	namespaced dynamicinformer.DynamicSharedInformerFactory
	cluster    dynamicinformer.DynamicSharedInformerFactory
	kinds      map[schema.GroupVersionKind]*kindInfo
	charts     []*charted
	stopCh     chan struct{}
}

type kindInfo struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
	// handled has synced once the first list has reached the history,
	// not only the informer's store.
	handled cache.ResourceEventHandlerRegistration
}

func newObserver(r *run) *observer {
	o := &observer{r: r, kinds: map[schema.GroupVersionKind]*kindInfo{}, stopCh: make(chan struct{})}
	o.namespaced = dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.kube.dynamic, 0, r.env.Namespace, nil)
	o.cluster = dynamicinformer.NewDynamicSharedInformerFactory(r.kube.dynamic, 0)
	o.charts = chartedFields(&r.s)
	return o
}

// start watches every kind the scenario names. Kinds are mapped to
// resources now, after the backend started: a CRD among the scenario's
// objects is installed by then only if the backend installed it, so its
// kinds are watched once createObjects has established them (watchLate).
func (o *observer) start(ctx context.Context) error {
	return o.watch(ctx, false)
}

// watchLate watches the kinds that could not be mapped before the
// scenario's CRDs were installed.
func (o *observer) watchLate(ctx context.Context) error {
	return o.watch(ctx, true)
}

func (o *observer) watch(ctx context.Context, late bool) error {
	var added []*kindInfo
	for _, gvk := range o.r.s.kinds() {
		if o.kinds[gvk] != nil {
			continue
		}
		m, err := o.r.kube.mapping(gvk)
		if err != nil {
			if meta.IsNoMatchError(err) && !late {
				continue // a kind of the scenario's CRDs: watched once they are in
			}
			return fmt.Errorf("observer: %w", err)
		}
		k := &kindInfo{gvk: gvk, gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
		factory := o.cluster
		if k.namespaced {
			factory = o.namespaced
		}
		k.informer = factory.ForResource(m.Resource).Informer()
		reg, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.changed(k, "ADDED", obj) },
			UpdateFunc: func(_, obj any) { o.changed(k, "MODIFIED", obj) },
			DeleteFunc: func(obj any) { o.changed(k, "DELETED", obj) },
		})
		if err != nil {
			return err
		}
		k.handled = reg
		o.kinds[gvk] = k
		o.r.hist.watched(m.Resource.Resource, gvk)
		added = append(added, k)
	}
	if len(added) == 0 {
		return nil
	}
	o.namespaced.Start(o.stopCh)
	o.cluster.Start(o.stopCh)
	for _, k := range added {
		if !cache.WaitForCacheSync(ctx.Done(), k.handled.HasSynced) {
			return fmt.Errorf("observer: the %s cache did not sync", k.gvr.Resource)
		}
	}
	return nil
}

func (o *observer) stop() {
	close(o.stopCh)
	o.namespaced.Shutdown()
	o.cluster.Shutdown()
}

func (o *observer) changed(k *kindInfo, typ string, obj any) {
	tombstone := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = t.Obj, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	kind := k.gvk.GroupVersion().String() + " " + k.gvk.Kind
	o.r.hist.event(reports.WatchEvent{At: now, Type: typ, Resource: k.gvr.Resource, Name: u.GetName(), RV: u.GetResourceVersion(),
		Kind: kind, Namespace: u.GetNamespace(), Object: check.Record(u), Tombstone: tombstone})
	if typ != "DELETED" && len(o.charts) > 0 {
		o.r.hist.chart(o.charts, kind, u, now)
	}
}
