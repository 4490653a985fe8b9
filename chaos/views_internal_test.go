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

// A DELETED event can reach an instance before the answer to its own
// delete: the view before that delete is still the one just before the
// deletion, not the newest met (which the event moved past it). An older
// deletion of the same name, before the object the delete answers for was
// made, is not taken for it.
func TestTheViewBeforeADeleteOvertakenByItsEvent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := objectKey("configmaps", "ns", "b")
	for _, answer := range []string{"12", "13"} { // the object's last version, or the deletion's
		var v views
		v.met(t0, "10")
		v.deleted(b, "11") // an earlier b, deleted before this one was made
		v.met(t0, "11")
		v.met(t0, "12") // b made again
		v.deleted(b, "13")
		v.met(t0, "13")
		v.wrote("delete", b, answer)
		rv, err := v.at(t0, view{Writes: 1})
		require.NoError(t, err)
		assert.Equal(t, int64(12), rv, "answer %s: just before the deletion, which still holds b", answer)
		// The claim is spent: a later delete of another b waits for its event.
		v.met(t0, "20")
		v.wrote("delete", b, "19")
		rv, _ = v.at(t0, view{Writes: 1})
		assert.Equal(t, int64(20), rv, "answer %s: no event met for the second delete yet", answer)
	}

	var v views
	v.met(t0, "10")
	v.deleted(b, "11")
	v.met(t0, "15")
	v.wrote("delete", b, "14") // a b made after the deletion met at 11
	rv, _ := v.at(t0, view{Writes: 1})
	assert.Equal(t, int64(15), rv, "the older deletion is not this one's: the newest met until its event")
	v.deleted(b, "16")
	rv, _ = v.at(t0, view{Writes: 1})
	assert.Equal(t, int64(15), rv)
}
