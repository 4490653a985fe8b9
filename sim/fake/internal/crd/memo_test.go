package crd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A CRD built or checked once in the process is not built or checked
// again: the same definition gives the same Kind and the same errors; a
// changed one is built anew.
func TestACRDIsBuiltOnce(t *testing.T) {
	crd := loadCRD(t, "widgets.yaml")
	a, err := New(crd)
	require.NoError(t, err)
	b, err := New(crd.DeepCopy())
	require.NoError(t, err)
	assert.Same(t, a, b)

	other := crd.DeepCopy()
	other.Spec.Names.ShortNames = append(other.Spec.Names.ShortNames, "wdg")
	c, err := New(other)
	require.NoError(t, err)
	assert.NotSame(t, a, c)
	assert.Contains(t, c.ShortNames(), "wdg")

	bad := crd.DeepCopy()
	bad.Name = "wrong.example.com"
	first := Validate(context.Background(), bad, nil)
	require.NotEmpty(t, first)
	first[0].Detail = "changed by the caller"
	again := Validate(context.Background(), bad, nil)
	require.NotEmpty(t, again)
	assert.NotEqual(t, "changed by the caller", again[0].Detail, "each caller gets its own list")
	assert.Empty(t, Validate(context.Background(), crd, nil))
}
