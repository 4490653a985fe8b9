// Package copier is a small controller for explore's tests: it keeps
// copies of a source ConfigMap (the names its "copier/targets" annotation
// lists, comma-separated) equal to the source's data, owned by it, and
// keeps one note ConfigMap saying which version of the source it copied.
//
// It comes in three flavours. Correct is deterministic: what it writes
// depends only on what it reads. Noisy is as correct, and draws from the
// unseeded global math/rand as some operators do: it looks again at a
// source after a random pause, replaces a copy (delete and create) instead
// of updating it at random, and names its note at random. DropsConflicts
// forgets a source whose copy's update met a 409, as if the conflict
// meant there was nothing to do: only the informers' 30 s resync brings
// the source back, so the copies converge late, yet converge.
//
// It is a test controller: one namespace, no leader election, no RBAC of
// its own.
package copier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/scenarios"
)

// Labels and annotations the copier reads and writes.
const (
	LabelRole         = "role"
	RoleSource        = "source"
	AnnotationTargets = "copier/targets"
	LabelCopyOf       = "copier/copy-of"
	LabelNoteOf       = "copier/note-of"
	KeyVersion        = "version"
)

// Resync is how often the informers hand every object to the handlers
// again.
const Resync = 30 * time.Second

// Flavour is how the copier behaves.
type Flavour string

// Flavours.
const (
	Correct        Flavour = "copier"
	Noisy          Flavour = "copier-noisy"
	DropsConflicts Flavour = "copier-drops-conflicts"
)

// Controller is a flavour of the copier as a controller under test.
type Controller struct{ Flavour Flavour }

var _ scenarios.Controller = Controller{}

// Name is the flavour's.
func (c Controller) Name() string { return string(c.Flavour) }

// New builds one instance on the instance's clientset.
func (c Controller) New(in scenarios.Instance) (scenarios.Runner, error) {
	if in.Client == nil {
		return nil, errors.New("copier: no client")
	}
	k := &copier{flavour: c.Flavour, client: in.Client, namespace: in.Namespace}
	k.factory = informers.NewSharedInformerFactoryWithOptions(in.Client, Resync, informers.WithNamespace(in.Namespace))
	cms := k.factory.Core().V1().ConfigMaps()
	k.lister = cms.Lister()
	k.synced = cms.Informer().HasSynced
	k.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	// A source's every change, and the deletion of a copy or a note, calls
	// for a sync; a copy's own updates are the copier's (the resync
	// catches anyone else's).
	_, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.enqueueSource,
		UpdateFunc: func(_, cur any) { k.enqueueSource(cur) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			k.enqueue(obj)
		},
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

type copier struct {
	flavour   Flavour
	client    kubernetes.Interface
	namespace string
	factory   informers.SharedInformerFactory
	lister    corelisters.ConfigMapLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	busy       atomic.Int32
	reconciles atomic.Int64
	retries    atomic.Int64
}

// enqueueSource queues obj if it is a source.
func (k *copier) enqueueSource(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[LabelRole] == RoleSource {
		k.queue.Add(cm.Name)
	}
}

// enqueue queues the source of obj: itself, or the one its labels name.
func (k *copier) enqueue(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	switch {
	case cm.Labels[LabelRole] == RoleSource:
		k.queue.Add(cm.Name)
	case cm.Labels[LabelCopyOf] != "":
		k.queue.Add(cm.Labels[LabelCopyOf])
	case cm.Labels[LabelNoteOf] != "":
		k.queue.Add(cm.Labels[LabelNoteOf])
	}
}

// Run runs the informers and two workers until ctx ends.
func (k *copier) Run(ctx context.Context) error {
	defer k.queue.ShutDown()
	k.factory.Start(ctx.Done())
	defer k.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for k.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

// Probe shows the queue to the harness.
func (k *copier) Probe() scenarios.Probe {
	return scenarios.Probe{Leading: true, QueueDepth: k.queue.Len(), Busy: k.busy.Load() > 0,
		Reconciles: k.reconciles.Load(), Retries: k.retries.Load(), CountsRetries: true}
}

func (k *copier) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	k.busy.Add(1)
	k.reconciles.Add(1)
	defer func() {
		k.busy.Add(-1)
		k.queue.Done(key)
	}()
	wrote, err := k.sync(ctx, key)
	switch {
	case err != nil && k.flavour == DropsConflicts && apierrors.IsConflict(err):
		// The bug: a conflict taken for "someone else did it".
		k.queue.Forget(key)
	case err != nil:
		k.retries.Add(1)
		k.queue.AddRateLimited(key)
	default:
		k.queue.Forget(key)
		if wrote && k.flavour == Noisy {
			// Look again after a pause drawn at random.
			k.queue.AddAfter(key, rand.N(2*time.Second))
		}
	}
	return true
}

// sync brings the copies and the note of source key to its data; wrote
// says whether it changed anything.
func (k *copier) sync(ctx context.Context, key string) (wrote bool, err error) {
	src, err := k.lister.ConfigMaps(k.namespace).Get(key)
	if apierrors.IsNotFound(err) {
		return false, nil // its copies are owned by it: the collector removes them
	}
	if err != nil {
		return false, err
	}
	owner := metav1.NewControllerRef(src, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	for _, name := range targets(src) {
		w, err := k.syncCopy(ctx, src, owner, name)
		wrote = wrote || w
		if err != nil {
			return wrote, err
		}
	}
	w, err := k.syncNote(ctx, src, owner)
	return wrote || w, err
}

func targets(src *corev1.ConfigMap) []string {
	var out []string
	for t := range strings.SplitSeq(src.Annotations[AnnotationTargets], ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (k *copier) syncCopy(ctx context.Context, src *corev1.ConfigMap, owner *metav1.OwnerReference, name string) (bool, error) {
	cms := k.client.CoreV1().ConfigMaps(k.namespace)
	cur, err := k.lister.ConfigMaps(k.namespace).Get(name)
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.namespace,
		Labels: map[string]string{LabelCopyOf: src.Name}, OwnerReferences: []metav1.OwnerReference{*owner}}, Data: maps.Clone(src.Data)}
	switch {
	case apierrors.IsNotFound(err):
		_, err := cms.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("copy %s: the cache has not seen it yet: %w", name, err)
		}
		return err == nil, err
	case err != nil:
		return false, err
	case maps.Equal(cur.Data, src.Data):
		return false, nil
	case k.flavour == Noisy && rand.IntN(2) == 0:
		// Replace rather than update: as good, and drawn at random.
		err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		_, err = cms.Create(ctx, want, metav1.CreateOptions{})
		return err == nil, err
	}
	upd := cur.DeepCopy()
	upd.Data = maps.Clone(src.Data)
	_, err = cms.Update(ctx, upd, metav1.UpdateOptions{})
	return err == nil, err
}

// syncNote keeps one note of the version copied: the correct copier
// names it after the source, the noisy one at random.
func (k *copier) syncNote(ctx context.Context, src *corev1.ConfigMap, owner *metav1.OwnerReference) (bool, error) {
	cms := k.client.CoreV1().ConfigMaps(k.namespace)
	notes, err := k.lister.ConfigMaps(k.namespace).List(labels.SelectorFromSet(labels.Set{LabelNoteOf: src.Name}))
	if err != nil {
		return false, err
	}
	slices.SortFunc(notes, func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	version := src.Data[KeyVersion]
	keep := slices.IndexFunc(notes, func(n *corev1.ConfigMap) bool { return n.Data[KeyVersion] == version })
	wrote := false
	if keep < 0 {
		name := src.Name + "-note"
		if k.flavour == Noisy {
			name = fmt.Sprintf("note-%d", 1_000_000+rand.IntN(9_000_000))
		}
		if i := slices.IndexFunc(notes, func(n *corev1.ConfigMap) bool { return n.Name == name }); i >= 0 {
			upd := notes[i].DeepCopy()
			upd.Data = map[string]string{KeyVersion: version}
			if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return false, err
			}
			keep = i
		} else {
			note := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.namespace,
				Labels: map[string]string{LabelNoteOf: src.Name}, OwnerReferences: []metav1.OwnerReference{*owner}},
				Data: map[string]string{KeyVersion: version}}
			if _, err := cms.Create(ctx, note, metav1.CreateOptions{}); err != nil {
				return false, err
			}
		}
		wrote = true
	}
	for i, n := range notes {
		if i == keep {
			continue
		}
		err := cms.Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}
