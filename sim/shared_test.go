package sim_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/sim"
)

// A shared start is made once; its failure, or its panic, is what every
// later Get returns, never a nil value that passes for a started one.
func TestASharedStartIsMadeOnceAndItsFailureKept(t *testing.T) {
	var s sim.Shared
	starts := 0
	ok := func() (any, func() error, error) { starts++; return "plane", func() error { return nil }, nil }
	for range 2 {
		v, err := s.Get("a", ok)
		require.NoError(t, err)
		assert.Equal(t, "plane", v)
	}
	assert.Equal(t, 1, starts)

	boom := errors.New("boom")
	_, err := s.Get("b", func() (any, func() error, error) { return nil, nil, boom })
	assert.ErrorIs(t, err, boom)
	_, err = s.Get("b", ok)
	assert.ErrorIs(t, err, boom, "remembered")

	assert.PanicsWithValue(t, "nil plane", func() {
		_, _ = s.Get("c", func() (any, func() error, error) { panic("nil plane") })
	})
	v, err := s.Get("c", ok)
	assert.Nil(t, v)
	assert.ErrorContains(t, err, "its start panicked: nil plane")
	assert.Equal(t, 1, starts)
	assert.NoError(t, s.Close())
}
