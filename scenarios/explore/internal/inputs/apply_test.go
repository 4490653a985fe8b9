package inputs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Change
		edit func(spec map[string]any)
	}{
		{"set a field", Change{Path: "spec.replicas", Op: OpSet, Value: 5}, func(spec map[string]any) {
			spec["replicas"] = int64(5)
		}},
		{"set adds a field", Change{Path: "spec.paused", Op: OpSet, Value: true}, func(spec map[string]any) {
			spec["paused"] = true
		}},
		{"set in a list item", Change{Path: "spec.targets[1].name", Op: OpSet, Value: "c"}, func(spec map[string]any) {
			spec["targets"].([]any)[1].(map[string]any)["name"] = "c"
		}},
		{"remove a field", Change{Path: "spec.note", Op: OpRemove}, func(spec map[string]any) {
			delete(spec, "note")
		}},
		{"add a key", Change{Path: `spec.config["a.b/c"]`, Op: OpAddKey, Value: "w"}, func(spec map[string]any) {
			spec["config"].(map[string]any)["a.b/c"] = "w"
		}},
		{"remove a key", Change{Path: `spec.config["k1"]`, Op: OpRemoveKey}, func(spec map[string]any) {
			delete(spec["config"].(map[string]any), "k1")
		}},
		{"append an item", Change{Path: "spec.targets[2]", Op: OpAddItem, Value: map[string]any{"name": "c"}}, func(spec map[string]any) {
			spec["targets"] = append(spec["targets"].([]any), map[string]any{"name": "c"})
		}},
		{"insert an item", Change{Path: "spec.targets[0]", Op: OpAddItem, Value: map[string]any{"name": "c"}}, func(spec map[string]any) {
			spec["targets"] = append([]any{map[string]any{"name": "c"}}, spec["targets"].([]any)...)
		}},
		{"remove an item", Change{Path: "spec.targets[0]", Op: OpRemoveItem}, func(spec map[string]any) {
			spec["targets"] = spec["targets"].([]any)[1:]
		}},
		{"reverse a list", Change{Path: "spec.targets", Op: OpReorder}, func(spec map[string]any) {
			l := spec["targets"].([]any)
			spec["targets"] = []any{l[1], l[0]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := pool()
			got, err := Apply(obj, tc.c)
			require.NoError(t, err)
			want := pool()
			tc.edit(want["spec"].(map[string]any))
			assert.Equal(t, want, got)
			assert.Equal(t, pool(), obj, "the input is not changed")
		})
	}
}

func TestApplyRefusesWhatIsNotThere(t *testing.T) {
	for _, c := range []Change{
		{Path: "", Op: OpSet, Value: 1},
		{Path: "spec[", Op: OpSet, Value: 1},
		{Path: "spec.missing.x", Op: OpSet, Value: 1},
		{Path: "spec.replicas.x", Op: OpSet, Value: 1},
		{Path: "spec.targets[5]", Op: OpSet, Value: 1},
		{Path: `spec.targets["x"]`, Op: OpSet, Value: 1},
		{Path: "spec.missing", Op: OpRemove},
		{Path: "spec.targets[0]", Op: OpRemove},
		{Path: `spec.config["nope"]`, Op: OpRemoveKey},
		{Path: `spec.config["k1"]`, Op: OpAddKey, Value: "v"},
		{Path: "spec.targets[3]", Op: OpAddItem, Value: 1},
		{Path: `spec.config["x"]`, Op: OpAddItem, Value: 1},
		{Path: "spec.targets[2]", Op: OpRemoveItem},
		{Path: "spec.replicas", Op: OpReorder},
		{Path: "spec.missing", Op: OpReorder},
		{Path: "spec.replicas", Op: "frobnicate"},
	} {
		obj := pool()
		_, err := Apply(obj, c)
		assert.Error(t, err, c.String())
		assert.Equal(t, pool(), obj, "the input is not changed: %s", c)
	}
}

// The result shares nothing with the input or the change's value.
func TestApplyCopies(t *testing.T) {
	obj := pool()
	value := map[string]any{"name": "c", "port": int64(1)}
	got, err := Apply(obj, Change{Path: "spec.targets[2]", Op: OpAddItem, Value: value})
	require.NoError(t, err)
	value["name"] = "changed"
	got["spec"].(map[string]any)["targets"].([]any)[0].(map[string]any)["name"] = "changed"
	got["spec"].(map[string]any)["config"].(map[string]any)["k1"] = "changed"
	assert.Equal(t, pool(), obj)
	assert.Equal(t, "c", got["spec"].(map[string]any)["targets"].([]any)[2].(map[string]any)["name"])
}

func TestChangeString(t *testing.T) {
	assert.Equal(t, "spec.replicas set 0 (its minimum)", Change{Path: "spec.replicas", Op: OpSet, Value: int64(0), Why: "its minimum"}.String())
	assert.Equal(t, `spec.targets[1] remove-item [invalid]`, Change{Path: "spec.targets[1]", Op: OpRemoveItem, Invalid: true}.String())
}
