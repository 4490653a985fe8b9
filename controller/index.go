package controller

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Two cache indexes keep the cost of a reconcile and of a pod event
// proportional to the objects involved rather than to the namespace:
//
//   - pods by label: "ns/key=value" for each label of a pod. A Deployment's
//     pods are found through one matchLabels pair of its selector (the anchor),
//     then filtered by the whole selector.
//   - Deployments by selector label: "ns/key=value" for each matchLabels pair
//     of a Deployment's selector, or "ns/*" when it has none. A pod's
//     Deployments are found through the pod's own labels plus "ns/*".
const (
	podsByLabel                = "converge.dev/pods-by-label"
	deploymentsBySelectorLabel = "converge.dev/deployments-by-selector-label"
)

func labelKey(namespace, key, value string) string { return namespace + "/" + key + "=" + value }

func anyKey(namespace string) string { return namespace + "/*" }

func indexPodsByLabel(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		keys = append(keys, labelKey(p.Namespace, k, v))
	}
	return keys, nil
}

func indexDeploymentsBySelectorLabel(obj any) ([]string, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Spec.Selector == nil {
		return nil, nil
	}
	if len(d.Spec.Selector.MatchLabels) == 0 {
		return []string{anyKey(d.Namespace)}, nil
	}
	keys := make([]string, 0, len(d.Spec.Selector.MatchLabels))
	for k, v := range d.Spec.Selector.MatchLabels {
		keys = append(keys, labelKey(d.Namespace, k, v))
	}
	return keys, nil
}

// anchor is the index key every pod matched by s must carry: its first
// matchLabels pair in key order.
func anchor(namespace string, s *metav1.LabelSelector) (string, bool) {
	if s == nil || len(s.MatchLabels) == 0 {
		return "", false
	}
	first := slices.Min(slices.Collect(maps.Keys(s.MatchLabels)))
	return labelKey(namespace, first, s.MatchLabels[first]), true
}

// readyPods counts the pods in d's namespace that match selector and are
// ready, from the cache.
func (c *Controller) readyPods(d *appsv1.Deployment, selector labels.Selector) (int32, error) {
	var pods []*corev1.Pod
	if key, ok := anchor(d.Namespace, d.Spec.Selector); ok {
		objs, err := c.podIndex.ByIndex(podsByLabel, key)
		if err != nil {
			return 0, err
		}
		for _, obj := range objs {
			if p, ok := obj.(*corev1.Pod); ok && selector.Matches(labels.Set(p.Labels)) {
				pods = append(pods, p)
			}
		}
	} else {
		var err error
		if pods, err = c.pods.Pods(d.Namespace).List(selector); err != nil {
			return 0, err
		}
	}
	return countReady(pods), nil
}

// deploymentsFor returns the cached Deployments whose selector matches p.
func (c *Controller) deploymentsFor(p *corev1.Pod) ([]*appsv1.Deployment, error) {
	keys := make([]string, 0, len(p.Labels)+1)
	for k, v := range p.Labels {
		keys = append(keys, labelKey(p.Namespace, k, v))
	}
	keys = append(keys, anyKey(p.Namespace))

	seen := map[cache.ObjectName]bool{}
	set := labels.Set(p.Labels)
	var out []*appsv1.Deployment
	for _, key := range keys {
		objs, err := c.deploymentIndex.ByIndex(deploymentsBySelectorLabel, key)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			d, ok := obj.(*appsv1.Deployment)
			if !ok || seen[cache.MetaObjectToName(d)] {
				continue
			}
			seen[cache.MetaObjectToName(d)] = true
			s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil || s.Empty() {
				continue // sync reports it when the Deployment itself is reconciled
			}
			if s.Matches(set) {
				out = append(out, d)
			}
		}
	}
	return out, nil
}
