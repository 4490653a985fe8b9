package scenarios

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An interfering write that does not reach the API server (it is being
// restarted) is made again a second later, not at the next tick, and
// still counts once made: a "count: 1" deletion is not lost to the
// restart.
func TestAnUnreachedInterferenceIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &run{start: time.Now(), hist: newHistory()}
		var calls []time.Duration
		var down atomic.Bool
		down.Store(true)
		time.AfterFunc(12500*time.Millisecond, func() { down.Store(false) })
		r.every(t.Context(), Duration(10*time.Second), 0, Duration(30*time.Second), 1, "interference 0", func(n int) tick {
			calls = append(calls, time.Since(r.start))
			if down.Load() {
				return unreached
			}
			return counted
		})
		r.wg.Wait()
		assert.Equal(t, []time.Duration{10 * time.Second, 11 * time.Second, 12 * time.Second, 13 * time.Second}, calls,
			"at its tick, then every second until the server answered, then done")
		assert.Nil(t, r.failed.Load())
	})
}

// Grid ticks that count go on from where they were: a retry does not move
// the grid.
func TestARetryKeepsTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &run{start: time.Now(), hist: newHistory()}
		var calls []time.Duration
		r.every(t.Context(), Duration(3*time.Second), 0, Duration(10*time.Second), 0, "interference 0", func(n int) tick {
			calls = append(calls, time.Since(r.start))
			if len(calls) == 1 {
				return unreached
			}
			return counted
		})
		r.wg.Wait()
		assert.Equal(t, []time.Duration{3 * time.Second, 4 * time.Second, 6 * time.Second, 9 * time.Second}, calls)
	})
}

// An actor that still owes its count when its until comes, because the
// server never answered, ends the run as the harness's error: the world
// the scenario describes did not happen.
func TestAnInterferenceNeverMadeIsTheHarnessError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &run{start: time.Now(), hist: newHistory(), abort: cancel}
		calls := 0
		r.every(ctx, Duration(10*time.Second), 0, Duration(30*time.Second), 1, "interference 0", func(n int) tick {
			calls++
			return unreached
		})
		r.wg.Wait()
		assert.Equal(t, 21, calls, "at 10 s, then each second up to 30 s")
		err := r.failed.Load()
		require.NotNil(t, err)
		assert.EqualError(t, *err, "interference 0 acted 0 of the 1 times it must by 30s: its writes did not reach the API server (a control-plane fault of the run), so the run is not the scenario's world")
		assert.True(t, r.aborted.Load())
	})
}
