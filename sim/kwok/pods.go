package kwok

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/sim/world"
)

// PodStages expresses a readiness model as kwok Stages for the pods of one
// namespace, and says why not when it cannot:
//   - ready-after-delay maps: a pod bound to a Node is Running and Ready
//     after Delay, plus up to Jitter drawn by kwok (not from the run's seed);
//   - never-ready maps: a bound pod is Running and never Ready;
//   - fraction-never-ready, flapping, capacity-limited and crash-looping do
//     not: a Stage cannot pick pods by a seeded draw, count ready pods per
//     Node or alternate on a period of its own, so the world plays those.
//
// Every mapped model also gets the kubelet's final delete: a pod marked for
// deletion is deleted at once.
func PodStages(namespace string, m world.Model) ([]*unstructured.Unstructured, error) {
	var stages []*unstructured.Unstructured
	switch m.Kind {
	case world.ReadyAfterDelay:
		delay := map[string]any{"durationMilliseconds": m.Delay.Milliseconds()}
		if m.Jitter > 0 {
			delay["jitterDurationMilliseconds"] = (m.Delay + m.Jitter).Milliseconds()
		}
		stages = append(stages, podStage(namespace, "pod-ready", delay, map[string]any{"statusTemplate": readyTemplate(true)},
			expr(".metadata.deletionTimestamp", "DoesNotExist"),
			expr(`.status.conditions.[] | select( .type == "Ready" ) | .status`, "NotIn", "True")))
	case world.NeverReady:
		stages = append(stages, podStage(namespace, "pod-running", nil, map[string]any{"statusTemplate": readyTemplate(false)},
			expr(".metadata.deletionTimestamp", "DoesNotExist"),
			expr(".status.phase", "NotIn", "Running")))
	default:
		return nil, fmt.Errorf("readiness model %s has no kwok Stage", m.Kind)
	}
	return append(stages, podStage(namespace, "pod-delete", nil, map[string]any{"delete": true},
		expr(".metadata.deletionTimestamp", "Exists"))), nil
}

func expr(key, op string, values ...string) map[string]any {
	e := map[string]any{"key": key, "operator": op}
	if len(values) > 0 {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		e["values"] = vs
	}
	return e
}

// podStage is a Stage for the bound pods of namespace that also match
// exprs, named after it.
func podStage(namespace, name string, delay, next map[string]any, exprs ...map[string]any) *unstructured.Unstructured {
	selector := []any{expr(".metadata.namespace", "In", namespace), expr(".spec.nodeName", "Exists")}
	for _, e := range exprs {
		selector = append(selector, e)
	}
	spec := map[string]any{
		"resourceRef": map[string]any{"apiGroup": "v1", "kind": "Pod"},
		"selector":    map[string]any{"matchExpressions": selector},
		"next":        next,
	}
	if delay != nil {
		spec["delay"] = delay
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": StageResource.GroupVersion().String(),
		"kind":       "Stage",
		"metadata":   map[string]any{"name": "converge-" + namespace + "-" + name, "labels": map[string]any{world.LabelRun: namespace}},
		"spec":       spec,
	}}
}

// readyTemplate is the status a kubelet reports for a running pod, ready
// or not.
func readyTemplate(ready bool) string {
	status := "False"
	if ready {
		status = "True"
	}
	return `{{ $now := Now }}
phase: Running
startTime: {{ $now | Quote }}
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: PodScheduled
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "` + status + `"
  lastTransitionTime: {{ $now | Quote }}
- type: Ready
  status: "` + status + `"
  lastTransitionTime: {{ $now | Quote }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: ` + map[bool]string{true: "true", false: "false"}[ready] + `
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
`
}

// InstallPodStages creates stages on the cluster cfg reaches and returns a
// function that deletes them.
func InstallPodStages(ctx context.Context, cfg *rest.Config, stages []*unstructured.Unstructured) (func(context.Context) error, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	var created []string
	remove := func(ctx context.Context) error {
		var errs []error
		for _, name := range created {
			err := client.Resource(StageResource).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("kwok: deleting stage %s: %w", name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, s := range stages {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := client.Resource(StageResource).Create(ctx, s, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("kwok: creating stage %s: %w", s.GetName(), err), remove(context.WithoutCancel(ctx)))
		}
		created = append(created, s.GetName())
	}
	return remove, nil
}
