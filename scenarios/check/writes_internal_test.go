package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestWriteRuleFields(t *testing.T) {
	for _, tt := range []struct {
		field, path string
		want        bool
	}{
		{"spec.replicas", "spec.replicas", true},
		{"spec", "spec.template.spec.containers", true},
		{"spec.replicas", "spec.replicasX", false},
		{`metadata.annotations["owner"]`, "metadata.annotations.owner", true},
		{`metadata.annotations["converge.dev/*"]`, `metadata.annotations["converge.dev/last-scale"]`, true},
		{`metadata.annotations["converge.dev/*"]`, `metadata.annotations["other.dev/x"]`, false},
		{"status", "status.conditions[0].type", true},
		{"*", "anything", true},
		{"status.*", "status.ready", true},
		{"status.*", "spec.x", false},
	} {
		assert.Equal(t, tt.want, allows(tt.field, tt.path), "%s allows %s", tt.field, tt.path)
	}
}

func TestChangedPaths(t *testing.T) {
	assert.ElementsMatch(t, []string{"spec.replicas", `metadata.annotations["converge.dev/x"]`},
		patchPaths(types.MergePatchType, []byte(`{"spec":{"replicas":3},"metadata":{"resourceVersion":"7","annotations":{"converge.dev/x":"y"}}}`)))
	assert.ElementsMatch(t, []string{"spec.replicas", `metadata.labels["a/b"]`},
		patchPaths(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":3},{"op":"add","path":"/metadata/labels/a~1b","value":"c"}]`)))

	old := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "1"}, "spec": map[string]any{"replicas": int64(2), "x": "same"},
		"status": map[string]any{"ready": int64(1)}}
	sent := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "1", "annotations": map[string]any{"owner": "t"}},
		"spec": map[string]any{"replicas": int64(3), "x": "same"}, "status": map[string]any{"ready": int64(5)}}
	assert.ElementsMatch(t, []string{"metadata.annotations.owner", "spec.replicas"}, diffPaths(old, sent, ""),
		"an update of the object leaves status alone; a map that appears is named by its keys")
	assert.ElementsMatch(t, []string{"status.ready"}, diffPaths(old, sent, "status"))
}
