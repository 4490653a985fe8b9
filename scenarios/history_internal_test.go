package scenarios

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/converge-lab/converge/reports"
)

// A panic in one run's controller is judged in every active run (see
// watchPanics), from the goroutine that panicked: a history made in one
// synctest bubble takes a violation from outside it without a fatal
// error.
func TestViolationFromOutsideTheBubble(t *testing.T) {
	var h *history
	synctest.Test(t, func(t *testing.T) { h = newHistory() })
	h.violate(InvNoPanic, time.Now(), "", "", "a goroutine of another run panicked")
	assert.Len(t, h.h.Recorded, 1)
	assert.Equal(t, reports.KindPanic, h.h.Recorded[0].Kind)
}
