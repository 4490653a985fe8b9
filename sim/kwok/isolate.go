package kwok

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/sim/world"
)

// nodeSelectorAnnotation is the namespace annotation whose node selector
// the PodNodeSelector admission plugin merges into every pod created in
// the namespace.
const nodeSelectorAnnotation = "scheduler.alpha.kubernetes.io/node-selector"

// IsolateRun makes every pod created from now on in a run's namespace go
// to the run's Nodes only: those the world labels with world.LabelRun set
// to the namespace. kube-apiserver adds the selector to each pod as it
// admits it (a pod with a node selector of its own on the same label, to
// another value, is refused), on a cluster Start created.
func IsolateRun(ctx context.Context, c kubernetes.Interface, namespace string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		nodeSelectorAnnotation: world.LabelRun + "=" + namespace,
	}}})
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	if _, err := c.CoreV1().Namespaces().Patch(ctx, namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kwok: keeping the pods of namespace %s on its run's Nodes: %w", namespace, err)
	}
	return nil
}
