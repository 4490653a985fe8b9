package inputs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// As on the server, an update is refused only for what it changes: an old
// error left as it was is ratcheted away, which a create does not do.
func TestValidatorRatchetsUpdates(t *testing.T) {
	v, err := NewValidator(schemaOf(t, poolSchema))
	require.NoError(t, err)
	old := pool()
	old["spec"].(map[string]any)["replicas"] = int64(20)
	next, err := Apply(old, Change{Path: "spec.note", Op: OpSet, Value: "changed"})
	require.NoError(t, err)

	assert.NoError(t, v.Validate(next, old))
	assert.ErrorContains(t, v.Validate(next, nil), "spec.replicas")
	worse, err := Apply(old, Change{Path: "spec.replicas", Op: OpSet, Value: int64(30)})
	require.NoError(t, err)
	assert.ErrorContains(t, v.Validate(worse, old), "spec.replicas")
}

func TestValidatorChecksListKeys(t *testing.T) {
	v, err := NewValidator(schemaOf(t, poolSchema))
	require.NoError(t, err)
	dup, err := Apply(pool(), Change{Path: "spec.targets[1].name", Op: OpSet, Value: "a"})
	require.NoError(t, err)
	assert.ErrorContains(t, v.Validate(dup, pool()), "Duplicate value")
	assert.NoError(t, v.Validate(pool(), nil))
}

func TestValidatorNeedsASchema(t *testing.T) {
	_, err := NewValidator(nil)
	assert.Error(t, err)
}
