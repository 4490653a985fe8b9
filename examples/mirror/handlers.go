package mirror

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
)

// Cache indexes that turn a ConfigMap event into the Mirrors it concerns.
const (
	// mirrorsBySource: "namespace/name" of a Mirror's source.
	mirrorsBySource = "examples.converge.dev/mirrors-by-source"
	// mirrorsByTarget: "namespace/name" of each of a Mirror's targets. Owner
	// references cannot link a ConfigMap the Mirror does not own to it: one
	// in the way of a target, whose deletion lets the target be created.
	mirrorsByTarget = "examples.converge.dev/mirrors-by-target"
	// configMapsByOwner: the UID of a ConfigMap's controlling Mirror, to
	// find the targets a Mirror no longer lists.
	configMapsByOwner = "examples.converge.dev/configmaps-by-owner"
)

var mirrorKind = v1alpha1.SchemeGroupVersion.WithKind("Mirror")

func indexMirrorsBySource(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Mirror)
	if !ok {
		return nil, nil
	}
	return []string{m.Namespace + "/" + m.Spec.Source}, nil
}

func indexMirrorsByTarget(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Mirror)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(m.Spec.Targets))
	for _, t := range m.Spec.Targets {
		keys = append(keys, m.Namespace+"/"+t)
	}
	return keys, nil
}

func indexConfigMapsByOwner(obj any) ([]string, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, nil
	}
	if ref := mirrorOwner(cm); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// mirrorOwner is cm's controller reference when a Mirror controls it.
func mirrorOwner(cm *corev1.ConfigMap) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.Kind != mirrorKind.Kind {
		return nil
	}
	// Any version: a reference stays valid when the served version changes.
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != mirrorKind.Group {
		return nil
	}
	return ref
}

// The handlers only turn events into keys: every decision is made by a
// worker from the caches.

func (c *Controller) enqueueMirror(obj any) {
	if m, ok := obj.(*v1alpha1.Mirror); ok {
		if c.cfg.Bug == BugKeptMirrors {
			c.kept.Store(cache.MetaObjectToName(m), m) // the bug: no delete handler forgets it
		}
		c.queue.Add(cache.MetaObjectToName(m))
	}
}

func (c *Controller) addConfigMap(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		c.enqueueFor(cm)
	}
}

func (c *Controller) updateConfigMap(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.ConfigMap)
	cur, ok2 := newObj.(*corev1.ConfigMap)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	c.enqueueFor(cur)
	if mirrorOwner(old) != nil && mirrorOwner(cur) == nil {
		c.enqueueFor(old) // its former owner lost a target
	}
}

func (c *Controller) deleteConfigMap(obj any) {
	if c.cfg.Bug == BugTombstonePanic {
		c.enqueueFor(obj.(*corev1.ConfigMap)) // the bug: a tombstone panics here
		return
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok && c.cfg.Bug == BugTombstoneIgnored {
		return // the bug: "a delete is a *ConfigMap"
	}
	if !ok {
		// The informer learnt of the delete from a relist: the last state
		// it knew is in the tombstone.
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if cm, ok = tombstone.Obj.(*corev1.ConfigMap); !ok {
			return
		}
	}
	c.enqueueFor(cm)
}

// enqueueFor enqueues the Mirrors cm is the source, a target or an owned
// target of.
func (c *Controller) enqueueFor(cm *corev1.ConfigMap) {
	key := cm.Namespace + "/" + cm.Name
	indexes := []string{mirrorsBySource, mirrorsByTarget}
	if c.cfg.Bug == BugNoSourceWatch {
		indexes = []string{mirrorsByTarget} // the bug: sources are not followed
	}
	for _, index := range indexes {
		objs, err := c.mirrorIndex.ByIndex(index, key)
		if err != nil {
			continue // only an unknown index name fails
		}
		for _, obj := range objs {
			c.enqueueMirror(obj)
		}
	}
	if ref := mirrorOwner(cm); ref != nil {
		c.queue.Add(cache.ObjectName{Namespace: cm.Namespace, Name: ref.Name})
	}
}
