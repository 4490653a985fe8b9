package kwok

import (
	"context"
	"embed"
	"fmt"
	"path"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

//go:embed stages/*.yaml
var stageFiles embed.FS

// StageResource is kwok's Stage, cluster-scoped.
var StageResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}

// installStages creates the cluster-wide stages of stages/, retrying while
// the Stage resource is not served yet.
func (c *Cluster) installStages(ctx context.Context, limit time.Duration) error {
	client, err := dynamic.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for _, e := range entries {
		raw, err := stageFiles.ReadFile(path.Join("stages", e.Name()))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			return fmt.Errorf("kwok: stage %s: %w", e.Name(), err)
		}
		for {
			_, err = client.Resource(StageResource).Create(ctx, obj, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("kwok: creating stage %s: %w", obj.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond) // the CRD is being established
		}
	}
	return nil
}
