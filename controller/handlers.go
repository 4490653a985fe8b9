package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// The handlers only turn events into queue keys: every decision is made by
// a worker, from the caches, on the latest state. They log with the logger
// of Run rather than utilruntime.HandleError, whose process-global backoff
// misbehaves under a virtual clock.

func (c *Controller) addDeployment(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.queue.Add(cache.MetaObjectToName(d))
	}
}

func (c *Controller) updateDeployment(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.Deployment)
	cur, ok2 := newObj.(*appsv1.Deployment)
	if !ok1 || !ok2 {
		return
	}
	key := cache.MetaObjectToName(cur)
	if rv, ok := c.conflicted.get(key); ok && rv != cur.ResourceVersion {
		// A write lost a 409 on an older version; this is the fresh state
		// to decide again on, whatever it changed.
		c.queue.Add(key)
		return
	}
	if deploymentDecisionChanged(old, cur) {
		c.queue.Add(key)
	}
}

// deploymentDecisionChanged reports whether an update touches anything the
// scaler's decision depends on. Status changes other than the observed
// generation (the Deployment controller's replica counts) do not: readiness
// is read from the pods.
func deploymentDecisionChanged(old, cur *appsv1.Deployment) bool {
	return old.Labels[LabelEnabled] != cur.Labels[LabelEnabled] ||
		old.Annotations[AnnotationMaxReplicas] != cur.Annotations[AnnotationMaxReplicas] ||
		old.Annotations[AnnotationLastScale] != cur.Annotations[AnnotationLastScale] ||
		desiredReplicas(old) != desiredReplicas(cur) ||
		old.Generation != cur.Generation ||
		old.Status.ObservedGeneration != cur.Status.ObservedGeneration ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		!equality.Semantic.DeepEqual(old.Spec.Selector, cur.Spec.Selector)
}

func (c *Controller) deleteDeployment(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		c.logger.Error(err, "Ignoring deployment delete")
		return
	}
	// The worker finds it gone and forgets what it knew of it.
	c.queue.Add(key)
}

func (c *Controller) addPod(obj any) {
	if p, ok := obj.(*corev1.Pod); ok && podReady(p) {
		c.enqueueOwners(p)
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if podReady(old) == podReady(cur) && (!podReady(cur) || labels.Equals(old.Labels, cur.Labels)) {
		return // the ready count of every Deployment is unchanged
	}
	c.enqueueOwners(cur)
	if !labels.Equals(old.Labels, cur.Labels) {
		c.enqueueOwners(old)
	}
}

func (c *Controller) deletePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			c.logger.Error(errUnexpected("pod delete", obj), "Ignoring pod delete")
			return
		}
		if p, ok = tombstone.Obj.(*corev1.Pod); !ok {
			c.logger.Error(errUnexpected("pod tombstone", tombstone.Obj), "Ignoring pod delete")
			return
		}
	}
	if podReady(p) {
		c.enqueueOwners(p)
	}
}

// enqueueOwners enqueues the managed Deployments whose selector matches p:
// the ones whose ready count p takes part in.
func (c *Controller) enqueueOwners(p *corev1.Pod) {
	ds, err := c.deploymentsFor(p)
	if err != nil {
		c.logger.Error(err, "Finding deployments for a pod", "pod", cache.MetaObjectToName(p))
		return
	}
	for _, d := range ds {
		c.queue.Add(cache.MetaObjectToName(d))
	}
}
