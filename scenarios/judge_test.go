package scenarios_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// saved is res as written to a file and read back.
func saved(t *testing.T, res *reports.Result) *reports.Result {
	t.Helper()
	path, err := reports.Write(t.TempDir(), res)
	require.NoError(t, err)
	back, err := reports.Read(path)
	require.NoError(t, err)
	return back
}

func failing(res *reports.Result) []string {
	var out []string
	for _, f := range res.Findings {
		if f.Fails() {
			out = append(out, f.Check)
		}
	}
	return out
}

// A saved run judged again, from its file alone, under its own scenario
// is the live verdict; under a scenario with a new invariant, a write rule
// or another goal, it is that scenario's verdict, without running again.
func TestRejudgeFromTheHistoryAlone(t *testing.T) {
	s, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	res := scenariotest.RunFake(t, s, scenarios.Options{Seed: 3, Controller: scaler.For(s)})
	require.True(t, res.Pass, "%v", res.Reasons)
	old := saved(t, res)

	again, err := scenarios.Rejudge(old, nil)
	require.NoError(t, err)
	assert.True(t, again.Pass)
	assert.Equal(t, old.Findings, again.Findings)
	assert.Equal(t, old.TimeToConverge, again.TimeToConverge)

	managed := scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment", Labels: "converge.dev/scaler=enabled"}
	t.Run("a new invariant", func(t *testing.T) {
		s2 := *s
		s2.Invariants = append(s2.Invariants, scenarios.Invariant{Name: "at-most-two", Select: managed, Rule: "object.spec.replicas <= 2"})
		again, err := scenarios.Rejudge(old, &s2)
		require.NoError(t, err)
		assert.False(t, again.Pass)
		assert.Equal(t, []string{"at-most-two"}, failing(again))
		f := again.Findings[0]
		assert.Equal(t, reports.KindInvariant, f.Kind)
		assert.Equal(t, "Deployment", f.Subject.Kind)
		assert.True(t, strings.HasPrefix(f.Subject.Name, "web-"), f.Subject.Name)
		assert.Contains(t, again.Invariants, "at-most-two")
	})
	t.Run("a write rule", func(t *testing.T) {
		s2 := *s
		s2.Writes = []scenarios.WriteRule{{Select: managed, Fields: []string{"metadata.labels"}}}
		again, err := scenarios.Rejudge(old, &s2)
		require.NoError(t, err)
		assert.Equal(t, []string{scenarios.InvWritesAllowed}, failing(again))
		assert.Contains(t, again.Findings[0].Detail, "no rule lets it write")
		require.NotNil(t, again.Findings[0].Request)
	})
	t.Run("a goal missed by its deadline", func(t *testing.T) {
		s2 := *s
		s2.Timing.Deadline = scenarios.Duration(time.Second)
		s2.Timing.Settle = scenarios.Duration(500 * time.Millisecond)
		again, err := scenarios.Rejudge(old, &s2)
		require.NoError(t, err)
		assert.Equal(t, []string{reports.CheckGoal}, failing(again))
		assert.Equal(t, reports.Duration(time.Second), again.Findings[0].Within)
		assert.NotEmpty(t, again.Findings[0].Detail, "the goal's finding says why it did not hold")
	})
	t.Run("a goal the record cannot decide", func(t *testing.T) {
		s2 := *s
		s2.Goal.Objects = []scenarios.Expectation{{Select: managed, Condition: "object.spec.replicas == 99"}}
		again, err := scenarios.Rejudge(old, &s2)
		require.NoError(t, err)
		assert.Equal(t, []string{reports.CheckGoal}, failing(again))
		assert.Contains(t, again.Findings[0].Detail, "undecided")
	})
	t.Run("a result without its history's facts", func(t *testing.T) {
		bare := *old
		bare.History = reports.History{}
		_, err := scenarios.Rejudge(&bare, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "run it again")
	})
}

// The check every scenariotest run makes (its saved history judged again
// gives the live verdict) fails where the history lacks what the verdict
// was judged on: here, the objects the observer saw.
func TestRejudgeNeedsTheObjects(t *testing.T) {
	s, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s2 := *s
	s2.Invariants = append(s2.Invariants, scenarios.Invariant{Name: "at-most-two",
		Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}, Rule: "object.spec.replicas <= 2"})
	res := scenariotest.RunFake(t, &s2, scenarios.Options{Seed: 3, Controller: scaler.For(s)})
	require.Equal(t, []string{"at-most-two"}, failing(res))
	data, err := json.Marshal(res)
	require.NoError(t, err)
	var stripped reports.Result
	require.NoError(t, json.Unmarshal(data, &stripped))
	for i := range stripped.History.Events {
		stripped.History.Events[i].Object = nil
	}
	again, err := scenarios.Rejudge(&stripped, &s2)
	require.NoError(t, err)
	assert.NotEqual(t, failing(res), failing(again), "without the objects the invariant cannot be judged again")
}
