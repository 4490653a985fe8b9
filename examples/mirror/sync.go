package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
)

// outcome is what one sync achieved, for the status.
type outcome struct {
	sourceMissing bool
	sourceVersion string
	synced        int32
	notOwned      []string // targets held by a ConfigMap the Mirror does not own
	failed        []string // targets whose write failed
	first         string   // the first target, named in the message (BugFirstTarget)
}

// errCacheBehind: the server holds a newer ConfigMap than the cache; the
// event that brings the cache up to date enqueues the Mirror again.
var errCacheBehind = errors.New("the cache is behind the server")

// sync reconciles one Mirror from the caches. It returns an error only when
// retrying can help.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx).WithValues("mirror", key)
	m, err := c.mirrorLister.Mirrors(key.Namespace).Get(key.Name)
	if kept, ok := c.kept.Load(key); ok && c.cfg.Bug == BugKeptMirrors {
		m, err = kept.(*v1alpha1.Mirror), nil // the bug: its own copy, which outlives the Mirror
	}
	if apierrors.IsNotFound(err) {
		return nil // the garbage collector deletes its targets
	}
	if err != nil {
		return err
	}
	if m.DeletionTimestamp != nil {
		return nil
	}

	src, err := c.configMapLister.ConfigMaps(m.Namespace).Get(m.Spec.Source)
	if apierrors.IsNotFound(err) {
		// Leave the targets as they are: a source that comes back, or a
		// spec that names another, enqueues the Mirror again.
		logger.V(2).Info("Waiting", "reason", v1alpha1.ReasonSourceNotFound, "source", m.Spec.Source)
		return c.updateStatus(ctx, m, outcome{sourceMissing: true})
	}
	if err != nil {
		return err
	}

	out := outcome{sourceVersion: src.ResourceVersion}
	if c.cfg.Bug == BugFirstTarget {
		out.first = m.Spec.Targets[0] // the bug: a Mirror may list none
	}
	var errs []error
	for _, name := range targets(m) {
		switch err := c.syncTarget(ctx, m, src, name); {
		case err == nil:
			out.synced++
		case errors.Is(err, errNotOwned):
			out.notOwned = append(out.notOwned, name)
		default:
			out.failed = append(out.failed, name)
			errs = append(errs, err)
		}
	}
	if c.cfg.Bug != BugRemovedTargetsKept { // the bug: never pruned
		if err := c.deleteRemovedTargets(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	if errors.Is(err, errCacheBehind) {
		// A status written now would report a failure that is only the
		// cache's lag.
		return err
	}

	if c.cfg.Bug == BugStaleStatus {
		// The bug: the status reports what was attempted, not what landed.
		out.synced += int32(len(out.failed))
		out.failed = nil
	}
	return errors.Join(err, c.updateStatus(ctx, m, out))
}

// targets are the Mirror's targets, each once, in spec order.
func targets(m *v1alpha1.Mirror) []string {
	seen := make(map[string]bool, len(m.Spec.Targets))
	out := make([]string, 0, len(m.Spec.Targets))
	for _, t := range m.Spec.Targets {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

var errNotOwned = errors.New("not owned by the Mirror")

// syncTarget makes the target called name hold src's data, creating it
// owned by m. A ConfigMap of that name that m does not control is left
// alone (errNotOwned): taking it over would let the garbage collector
// delete someone else's data with the Mirror.
func (c *Controller) syncTarget(ctx context.Context, m *v1alpha1.Mirror, src *corev1.ConfigMap, name string) error {
	cur, err := c.configMapLister.ConfigMaps(m.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace},
			Data:       maps.Clone(src.Data),
			BinaryData: maps.Clone(src.BinaryData),
		}
		if c.cfg.Bug != BugOrphanTargets { // the bug: no owner reference
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(m, mirrorKind)}
		}
		_, err = c.kube.CoreV1().ConfigMaps(m.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating target %s: %w", name, errCacheBehind)
		}
		if err != nil {
			return fmt.Errorf("creating target %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if c.cfg.Bug != BugOrphanTargets && !metav1.IsControlledBy(cur, m) { // the bug: adopts by name
		return errNotOwned
	}
	if equality.Semantic.DeepEqual(cur.Data, src.Data) && equality.Semantic.DeepEqual(cur.BinaryData, src.BinaryData) {
		return nil
	}
	cm := cur.DeepCopy()
	cm.Data = maps.Clone(src.Data)
	cm.BinaryData = maps.Clone(src.BinaryData)
	_, err = c.kube.CoreV1().ConfigMaps(m.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("updating target %s: %w", name, errCacheBehind)
	}
	if err != nil {
		return fmt.Errorf("updating target %s: %w", name, err)
	}
	return nil
}

// deleteRemovedTargets deletes the ConfigMaps m controls but no longer
// lists.
func (c *Controller) deleteRemovedTargets(ctx context.Context, m *v1alpha1.Mirror) error {
	owned, err := c.configMapIndex.ByIndex(configMapsByOwner, string(m.UID))
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(m.Spec.Targets))
	for _, t := range m.Spec.Targets {
		want[t] = true
	}
	var errs []error
	for _, obj := range owned {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || want[cm.Name] || cm.DeletionTimestamp != nil {
			continue
		}
		// The UID precondition spares a ConfigMap of the same name created
		// since by someone else.
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}}
		if c.cfg.Bug == BugDeleteByName {
			opts = metav1.DeleteOptions{} // the bug: whatever holds the name now
		}
		err := c.kube.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting removed target %s: %w", cm.Name, err))
		}
	}
	return errors.Join(errs...)
}

// updateStatus writes the status out describes, on the newest Mirror the
// cache holds, unless it already says so. The generation is m's: the one
// the sync worked from.
func (c *Controller) updateStatus(ctx context.Context, m *v1alpha1.Mirror, out outcome) error {
	fresh, err := c.mirrorLister.Mirrors(m.Namespace).Get(m.Name)
	if apierrors.IsNotFound(err) || (err == nil && fresh.UID != m.UID) {
		return nil
	}
	if err != nil {
		return err
	}
	status := desiredStatus(fresh.Status, m.Generation, out)
	if equality.Semantic.DeepEqual(status, fresh.Status) {
		return nil
	}
	update := fresh.DeepCopy()
	if c.cfg.Bug == BugStatusFromCache {
		update = fresh // the bug: the cache's own object
	}
	update.Status = status
	if _, err := c.mirrors.ExamplesV1alpha1().Mirrors(m.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// desiredStatus is cur updated with out. The condition keeps its
// transition time while its status does not change.
func desiredStatus(cur v1alpha1.MirrorStatus, generation int64, out outcome) v1alpha1.MirrorStatus {
	s := *cur.DeepCopy()
	s.ObservedGeneration = generation
	s.SyncedTargets = out.synced
	s.SourceResourceVersion = out.sourceVersion
	cond := metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case out.sourceMissing:
		cond.Reason, cond.Message = v1alpha1.ReasonSourceNotFound, "the source ConfigMap does not exist"
	case len(out.failed) > 0:
		cond.Reason, cond.Message = v1alpha1.ReasonTargetWriteFailed, "writing failed for "+strings.Join(out.failed, ", ")
	case len(out.notOwned) > 0:
		cond.Reason, cond.Message = v1alpha1.ReasonTargetNotOwned, "ConfigMaps not owned by this Mirror: "+strings.Join(out.notOwned, ", ")
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonSynced
		cond.Message = fmt.Sprintf("%d targets hold the source's data", out.synced)
		if out.first != "" {
			cond.Message = fmt.Sprintf("%s and %d more hold the source's data", out.first, out.synced-1)
		}
	}
	meta.SetStatusCondition(&s.Conditions, cond)
	return s
}
