package world_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/sim/world"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestModels(t *testing.T) {
	type probe struct {
		at       time.Duration
		ready    bool
		restarts int32
		next     time.Duration
	}
	for _, tt := range []struct {
		name   string
		model  world.Model
		others int
		probes []probe
	}{
		{"ready after delay", world.Model{Kind: world.ReadyAfterDelay, Delay: 5 * time.Second}, 0, []probe{
			{0, false, 0, 5 * time.Second}, {4 * time.Second, false, 0, time.Second}, {5 * time.Second, true, 0, 0}, {time.Hour, true, 0, 0},
		}},
		{"never ready", world.Model{Kind: world.NeverReady}, 0, []probe{{0, false, 0, 0}, {time.Hour, false, 0, 0}}},
		{"flapping", world.Model{Kind: world.Flapping, Delay: time.Second, Period: 10 * time.Second}, 0, []probe{
			{0, false, 0, time.Second}, {time.Second, true, 0, 10 * time.Second}, {6 * time.Second, true, 0, 5 * time.Second},
			{11 * time.Second, false, 0, 10 * time.Second}, {21 * time.Second, true, 0, 10 * time.Second},
		}},
		{"capacity: room on the node", world.Model{Kind: world.CapacityLimited, Delay: time.Second, PerNode: 2}, 1, []probe{{time.Second, true, 0, 0}}},
		{"capacity: node full", world.Model{Kind: world.CapacityLimited, Delay: time.Second, PerNode: 2}, 2, []probe{{time.Minute, false, 0, time.Second}}},
		{"crash looping", world.Model{Kind: world.CrashLooping, Period: 10 * time.Second}, 0, []probe{
			{0, false, 0, 10 * time.Second}, {25 * time.Second, false, 2, 5 * time.Second},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.model.Validate())
			for _, p := range tt.probes {
				got := tt.model.State(1, "pod-a", t0, t0.Add(p.at), tt.others)
				assert.Equal(t, world.PodState{Ready: p.ready, Restarts: p.restarts, Next: p.next}, got, "at %v", p.at)
			}
		})
	}
}

func TestSeededJitterAndFractionReplay(t *testing.T) {
	jitter := world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second, Jitter: 10 * time.Second}
	never := world.Model{Kind: world.FractionNever, Fraction: 0.3}
	delays := map[time.Duration]bool{}
	neverCount := 0
	for i := range 1000 {
		pod := fmt.Sprintf("web-%d", i)
		s := jitter.State(42, pod, t0, t0, 0)
		assert.Equal(t, s, jitter.State(42, pod, t0, t0, 0), "same seed, same pod, same answer")
		assert.GreaterOrEqual(t, s.Next, time.Second)
		assert.Less(t, s.Next, 11*time.Second)
		delays[s.Next] = true
		if !never.State(42, pod, t0, t0.Add(time.Hour), 0).Ready {
			neverCount++
		}
	}
	assert.Greater(t, len(delays), 900, "jitter differs between pods")
	assert.InDelta(t, 300, neverCount, 50, "about the fraction asked for")
	assert.NotEqual(t, jitter.State(1, "web-0", t0, t0, 0), jitter.State(2, "web-0", t0, t0, 0), "another seed, another draw")
}

func TestModelValidation(t *testing.T) {
	for _, m := range []world.Model{
		{Kind: "sometimes"},
		{Kind: world.Flapping},
		{Kind: world.CrashLooping, Period: -time.Second},
		{Kind: world.FractionNever, Fraction: 1.5},
		{Kind: world.ReadyAfterDelay, Delay: -time.Second},
		{Kind: world.CapacityLimited, PerNode: -1},
	} {
		assert.Error(t, m.Validate(), "%+v", m)
	}
}
