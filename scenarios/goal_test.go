package scenarios_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

// The goal is judged when something happened, not once a poll: the
// baseline's world held through an hour of settle window (make bench's
// idle-hour) is judged a few dozen times (a poll each 250 ms would be
// 14,400), as the baseline with its own window is.
func TestAnIdleHourCostsNoJudging(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	var base *scenarios.Scenario
	for _, s := range all {
		if s.Name == "baseline" {
			base = s
		}
	}
	require.NotNil(t, base)
	// make bench's idle hour: the baseline's world, an hour of settle.
	long, err := scenarios.Load("scaler/testdata/idle-hour.yaml")
	require.NoError(t, err)
	require.Equal(t, scenarios.Duration(time.Hour), long.Timing.Settle)
	for _, s := range []*scenarios.Scenario{base, long} {
		synctest.Test(t, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(s)})
			require.True(t, res.Pass, "%v", res.Reasons)
			settle := time.Duration(s.Timing.Settle)
			assert.GreaterOrEqual(t, time.Duration(res.Simulated), settle)
			assert.Less(t, res.Counters.GoalEvaluations, 100, "settle %v: the goal judged %d times in %v", settle, res.Counters.GoalEvaluations, time.Duration(res.Simulated))
			t.Logf("settle %v: %d judgements in %v simulated, converged after %v", settle, res.Counters.GoalEvaluations, time.Duration(res.Simulated), time.Duration(res.TimeToConverge))
		})
	}
}

// A run with nothing happening still asks its caller's Limit, so a
// wall-clock limit ends it however far off its deadline is.
func TestLimitEndsAnIdleRun(t *testing.T) {
	s, err := scenarios.Parse("s.yaml", []byte(head+"objects: [{count: 1, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}}]\n"+
		"goal: {objects: [{select: {apiVersion: v1, kind: ConfigMap}, count: 2}]}\ntiming: {deadline: 24h}\n"))
	require.NoError(t, err)
	var calls atomic.Int64
	limit := func() error {
		if calls.Add(1) > 100 {
			return fmt.Errorf("the run passed its wall-clock limit of 1s")
		}
		return nil
	}
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Limit: limit, Controller: scaler.Controller{}})
		assert.Equal(t, "the run passed its wall-clock limit of 1s", res.Error)
		assert.Less(t, time.Duration(res.Simulated), time.Hour)
	})
}
