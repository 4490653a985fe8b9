package fake

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The garbage collector, played as kube-controller-manager's does it:
// ownerReferences cascade. A dependent whose owners are all gone is
// deleted (background deletion); an owner deleted in the foreground waits,
// behind its foregroundDeletion finalizer, until its dependents that block
// owner deletion are gone; an owner deleted with the orphan policy has its
// references removed from its dependents first. It runs in its own
// goroutine, after the write that set it off, as the real one runs after
// the watch event.

// objRef locates a stored object.
type objRef struct {
	gvr schema.GroupVersionResource
	key objKey
}

// owners is the store's index of ownership: every object by uid, and the
// dependents of every owner uid. Callers hold s.mu.
type owners struct {
	byUID      map[types.UID]objRef
	dependents map[types.UID]map[objRef]struct{}
}

func newOwners() owners {
	return owners{byUID: map[types.UID]objRef{}, dependents: map[types.UID]map[objRef]struct{}{}}
}

// index follows a write in the ownership index, and returns the owners
// the collector has to look at: owners that are gone or missing, owners
// terminating with a garbage collector finalizer, and the owners of a
// deleted dependent that wait for it (foreground deletion).
func (o *owners) index(e event, terminating func(types.UID) bool) (uids []types.UID) {
	m, err := meta.Accessor(e.obj)
	if err != nil {
		return nil
	}
	ref := objRef{e.gvr, objKey{e.ns, m.GetName()}}
	var before []metav1.OwnerReference
	if e.prev != nil {
		pm, _ := meta.Accessor(e.prev)
		before = pm.GetOwnerReferences()
	}
	now := m.GetOwnerReferences()
	if e.typ == watch.Deleted {
		now = nil
	}
	for _, r := range before {
		if !slices.ContainsFunc(now, func(n metav1.OwnerReference) bool { return n.UID == r.UID }) {
			if terminating(r.UID) {
				uids = append(uids, r.UID)
			}
			if deps := o.dependents[r.UID]; deps != nil {
				delete(deps, ref)
				if len(deps) == 0 {
					delete(o.dependents, r.UID)
				}
			}
		}
	}
	for _, r := range now {
		deps := o.dependents[r.UID]
		if deps == nil {
			deps = map[objRef]struct{}{}
			o.dependents[r.UID] = deps
		}
		deps[ref] = struct{}{}
		if _, ok := o.byUID[r.UID]; !ok {
			uids = append(uids, r.UID) // an owner that is not there: dangling
		}
	}
	switch {
	case e.typ == watch.Deleted:
		delete(o.byUID, m.GetUID())
		if len(o.dependents[m.GetUID()]) > 0 {
			uids = append(uids, m.GetUID())
		}
	default:
		o.byUID[m.GetUID()] = ref
		if m.GetDeletionTimestamp() != nil && hasGCFinalizer(m.GetFinalizers()) {
			uids = append(uids, m.GetUID())
		}
	}
	return uids
}

func hasGCFinalizer(fs []string) bool {
	return slices.Contains(fs, metav1.FinalizerDeleteDependents) || slices.Contains(fs, metav1.FinalizerOrphanDependents)
}

// collector is the garbage collector's queue of owner uids to look at.
type collector struct {
	mu      sync.Mutex
	pending []types.UID
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newCollector() *collector {
	return &collector{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (c *collector) enqueue(uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	c.mu.Lock()
	c.pending = append(c.pending, uids...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run collects until stopped.
func (c *collector) run(s *store) {
	defer close(c.done)
	for {
		c.mu.Lock()
		batch := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, uid := range batch {
			s.collect(context.Background(), uid)
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
	}
}

// collect looks at owner uid: gone, its dependents go (or lose the
// reference, when they have other owners); terminating in the foreground
// or orphaning, its dependents are handled and its finalizer removed.
func (s *store) collect(ctx context.Context, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	deps := make([]objRef, 0, len(s.owners.dependents[uid]))
	for d := range s.owners.dependents[uid] {
		deps = append(deps, d)
	}
	slices.SortFunc(deps, func(a, b objRef) int {
		if c := compareKeys(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.gvr.String(), b.gvr.String())
	})
	ownerRef, exists := s.owners.byUID[uid]
	var owner metav1.Object
	if exists {
		if obj, ok := s.tables[ownerRef.gvr][ownerRef.key]; ok {
			owner, _ = meta.Accessor(obj)
		}
	}
	switch {
	case owner == nil:
		for _, d := range deps {
			s.dropOwner(ctx, d, uid, true)
		}
	case owner.GetDeletionTimestamp() == nil:
		return
	case slices.Contains(owner.GetFinalizers(), metav1.FinalizerOrphanDependents):
		for _, d := range deps {
			s.dropOwner(ctx, d, uid, false)
		}
		s.kinds.removeFinalizer(ctx, s.kinds.resourceOf(ownerRef.gvr), ownerRef.key.ns, ownerRef.key.name, metav1.FinalizerOrphanDependents)
	case slices.Contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents):
		blocking := 0
		for _, d := range deps {
			obj, ok := s.tables[d.gvr][d.key]
			if !ok {
				continue
			}
			m, _ := meta.Accessor(obj)
			if s.solidOwner(m.GetOwnerReferences(), uid) {
				// Another owner keeps it: only the reference goes, as
				// the real collector does.
				s.dropOwner(ctx, d, uid, false)
				continue
			}
			if refBlocks(m.GetOwnerReferences(), uid) {
				blocking++
			}
			if m.GetDeletionTimestamp() == nil {
				if r := s.kinds.resourceOf(d.gvr); r != nil {
					_, _ = s.deleteLocked(ctx, r, d.key.ns, d.key.name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)})
				}
			}
		}
		// Otherwise looked at again when a blocking dependent goes.
		if blocking == 0 {
			s.kinds.removeFinalizer(ctx, s.kinds.resourceOf(ownerRef.gvr), ownerRef.key.ns, ownerRef.key.name, metav1.FinalizerDeleteDependents)
		}
	}
}

func refBlocks(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
		}
	}
	return false
}

// dropOwner removes the reference to owner uid from dependent d: the
// dependent is deleted instead when it was its last owner and del is set.
func (s *store) dropOwner(ctx context.Context, d objRef, uid types.UID, del bool) {
	r := s.kinds.resourceOf(d.gvr)
	obj, ok := s.tables[d.gvr][d.key]
	if r == nil || !ok {
		return
	}
	m, _ := meta.Accessor(obj)
	refs := m.GetOwnerReferences()
	var rest []metav1.OwnerReference
	for _, ref := range refs {
		if ref.UID != uid {
			rest = append(rest, ref)
		}
	}
	if len(rest) == len(refs) {
		return
	}
	if del && !s.anyOwnerExists(rest) {
		if m.GetDeletionTimestamp() == nil {
			_, _ = s.deleteLocked(ctx, r, d.key.ns, d.key.name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)})
		}
		return
	}
	out := shallowCopy(obj)
	om, _ := meta.Accessor(out)
	om.SetOwnerReferences(rest)
	_, _ = s.updateLocked(ctx, r, d.key.ns, out, "", m.GetResourceVersion(), writeOptions{manager: "kube-controller-manager"})
}

// solidOwner: one of refs other than uid exists and is not itself
// waiting for its dependents (foreground deletion). Callers hold s.mu.
func (s *store) solidOwner(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if _, ok := s.owners.byUID[r.UID]; ok && r.UID != uid && !s.ownerTerminating(r.UID) {
			return true
		}
	}
	return false
}

func (s *store) anyOwnerExists(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if _, ok := s.owners.byUID[r.UID]; ok {
			return true
		}
	}
	return false
}

// ownerTerminating: uid is an owner being deleted in the foreground.
// Callers hold s.mu.
func (s *store) ownerTerminating(uid types.UID) bool {
	ref, ok := s.owners.byUID[uid]
	if !ok {
		return false
	}
	obj, ok := s.tables[ref.gvr][ref.key]
	if !ok {
		return false
	}
	m, _ := meta.Accessor(obj)
	return m.GetDeletionTimestamp() != nil && slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents)
}
