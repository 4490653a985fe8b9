package bounded

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A value put is got back; past its limit the map starts again.
func TestMapStartsAgainPastItsLimit(t *testing.T) {
	m := Map[string, int]{Limit: 3}
	_, ok := m.Get("a")
	assert.False(t, ok)
	for i := range 3 {
		m.Put(strconv.Itoa(i), i)
	}
	v, ok := m.Get("2")
	assert.True(t, ok)
	assert.Equal(t, 2, v)
	assert.Equal(t, 3, m.Len())
	m.Put("3", 3)
	assert.Equal(t, 1, m.Len())
	_, ok = m.Get("0")
	assert.False(t, ok)
}
