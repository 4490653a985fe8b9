package scenarios

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
)

// observer is the harness's god view of the kinds a scenario names: an
// unfaulted client's informers. It records every change it sees in the
// history, the object with it: the invariants, the write rules and the
// goal are judged on that record (package check).
type observer struct {
	r      *run
	kinds  map[schema.GroupVersionKind]*kindInfo
	charts []*charted
	stopCh chan struct{}
	wg     sync.WaitGroup // the informers' runs
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
		k.informer = o.informer(k)
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
	for _, k := range added {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			k.informer.Run(o.stopCh)
		}()
	}
	for _, k := range added {
		if !cache.WaitForCacheSync(ctx.Done(), k.handled.HasSynced) {
			return fmt.Errorf("observer: the %s cache did not sync", k.gvr.Resource)
		}
	}
	return nil
}

func (o *observer) stop() {
	close(o.stopCh)
	o.wg.Wait()
}

// informer is k's informer, through a list and watch that record each
// list after the first (History.Gaps): an informer lists again when its
// watch broke and could not resume (an API server restarted, say), and
// what changed meanwhile reaches the history as one event per object, its
// versions between lost. The judges of objects across kinds must know.
func (o *observer) informer(k *kindInfo) cache.SharedIndexInformer {
	var ri dynamic.ResourceInterface = o.r.kube.dynamic.Resource(k.gvr)
	if k.namespaced {
		ri = o.r.kube.dynamic.Resource(k.gvr).Namespace(o.r.env.Namespace)
	}
	var informer cache.SharedIndexInformer
	// The first list is not a gap, nor is a plain list that follows a
	// streamed one the server refused: the informer has not synced yet.
	relist := func() {
		if informer.HasSynced() {
			o.r.hist.gap(k.gvr.Resource, time.Now(), nil)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Continue == "" {
				relist()
			}
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				relist() // a list streamed through a watch
			}
			return ri.Watch(ctx, opts)
		},
	}
	informer = cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return informer
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
