package inputs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChainsCompose(t *testing.T) {
	s := schemaOf(t, poolSchema)
	obj := pool()
	cs := changes(t, s, obj, Rules{})
	chains := Chains(obj, cs, 3, 200)
	require.Len(t, chains, 200)
	lengths := map[int]int{}
	for _, chain := range chains {
		lengths[len(chain)]++
		state := obj
		for _, c := range chain {
			assert.False(t, c.Invalid, "%s", c)
			var err error
			state, err = Apply(state, c)
			require.NoError(t, err, "%v", chain)
		}
	}
	assert.Equal(t, 2, len(chains[0]), "shorter chains first")
	assert.Equal(t, pool(), obj, "the input is not changed")
	assert.Equal(t, chains, Chains(obj, cs, 3, 200), "deterministic")
}

// A chain touches each value once: no change under another's path, and
// nothing under a list whose items another change moves.
func TestChainsDoNotTouchAValueTwice(t *testing.T) {
	cs := []Change{
		{Path: "spec.replicas", Op: OpSet, Value: int64(0)},
		{Path: "spec.replicas", Op: OpRemove},
		{Path: "spec.targets[0]", Op: OpRemoveItem},
		{Path: "spec.targets[1].port", Op: OpSet, Value: int64(1)},
		{Path: `spec.config["k1"]`, Op: OpRemoveKey},
		{Path: "spec.paused", Op: OpSet, Value: true, Invalid: true},
	}
	got := Chains(pool(), cs, 3, 100)
	var rendered [][]string
	for _, chain := range got {
		rendered = append(rendered, ops(chain))
	}
	assert.Equal(t, [][]string{
		{"spec.replicas set", "spec.targets[0] remove-item"},
		{"spec.replicas set", "spec.targets[1].port set"},
		{"spec.replicas set", `spec.config["k1"] remove-key`},
		{"spec.replicas remove", "spec.targets[0] remove-item"},
		{"spec.replicas remove", "spec.targets[1].port set"},
		{"spec.replicas remove", `spec.config["k1"] remove-key`},
		{"spec.targets[0] remove-item", `spec.config["k1"] remove-key`},
		{"spec.targets[1].port set", `spec.config["k1"] remove-key`},
		{"spec.replicas set", "spec.targets[0] remove-item", `spec.config["k1"] remove-key`},
		{"spec.replicas set", "spec.targets[1].port set", `spec.config["k1"] remove-key`},
		{"spec.replicas remove", "spec.targets[0] remove-item", `spec.config["k1"] remove-key`},
		{"spec.replicas remove", "spec.targets[1].port set", `spec.config["k1"] remove-key`},
	}, rendered)
}

// A change that no longer applies after the ones before it ends the chain.
func TestChainsSkipWhatDoesNotApply(t *testing.T) {
	cs := []Change{
		{Path: "spec.note", Op: OpRemove},
		{Path: `spec.config["k1"]`, Op: OpRemoveKey},
		{Path: `spec.config["k1x"]`, Op: OpRemoveKey}, // not there
	}
	assert.Equal(t, [][]Change{{cs[0], cs[1]}}, Chains(pool(), cs, 3, 10))
	assert.Empty(t, Chains(pool(), cs, 1, 10), "a chain has two changes at least")
	assert.Empty(t, Chains(pool(), cs, 3, 0))
	assert.Len(t, Chains(pool(), append(cs[:2:2], Change{Path: "spec.paused", Op: OpSet, Value: true}), 3, 2), 2, "capped")
}
