package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The view before a delete is the state just before the deletion's
// revision once a DELETED event of the object is met, and the newest met
// until then (which cannot hold the deletion yet).
func TestTheViewBeforeADeleteWaitsForItsRevision(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var v views
	v.met(t0, "10")
	v.wrote("patch", objectKey("configmaps", "ns", "a"), "11")
	v.met(t0, "11")
	v.met(t0, "14") // someone else's writes
	v.wrote("delete", objectKey("configmaps", "ns", "b"), "")
	rv, err := v.at(t0, view{Writes: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(14), rv, "the newest met, before the DELETED event")

	v.deleted(objectKey("configmaps", "ns", "other"), "15")
	rv, _ = v.at(t0, view{Writes: 1})
	assert.Equal(t, int64(14), rv, "another object's deletion changes nothing")
	v.deleted(objectKey("configmaps", "ns", "b"), "17")
	rv, _ = v.at(t0, view{Writes: 1})
	assert.Equal(t, int64(16), rv, "just before the deletion's revision")
	rv, _ = v.at(t0, view{Writes: 2})
	assert.Equal(t, int64(10), rv, "before the patch: its answer's version minus one")
	rv, _ = v.at(t0, view{Deletions: 1})
	assert.Equal(t, int64(16), rv)
	rv, _ = v.at(t0, view{Deletions: 2})
	assert.Equal(t, int64(14), rv, "before the other deletion")
}
