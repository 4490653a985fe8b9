package expect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A false rule names the fields it read and their values.
func TestExplainNamesWhatARuleRead(t *testing.T) {
	e, err := Compile("object.status.readyReplicas >= object.spec.replicas && has(object.metadata.labels) && object.spec.template.metadata.labels.all(k, k != 'x')", false)
	require.NoError(t, err)
	obj := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"replicas": int64(3), "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}}},
		"status":   map[string]any{"readyReplicas": int64(1)},
	}
	held, err := e.Eval(obj, nil)
	require.NoError(t, err)
	require.False(t, held)
	assert.Equal(t, "object.status.readyReplicas = 1, object.spec.replicas = 3", e.Explain(obj, nil, nil),
		"what a comprehension reads and what has() tests are left out")

	tr, err := Compile("object.spec.replicas >= oldObject.spec.replicas", true)
	require.NoError(t, err)
	old := map[string]any{"spec": map[string]any{"replicas": int64(5)}}
	assert.Equal(t, "object.spec.replicas = 3, oldObject.spec.replicas = 5", tr.Explain(obj, old, nil))
}
