package scenarios_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

// An invariant or write rule that could not fail in a run is reported as
// a fault that never fired is: a typo in a field's name, a selector that
// matches nothing, a rule for writes that were not made. The run still
// passes; the test that ran it fails on Unfired.
func TestVacuousChecksAreReported(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	deployments := scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}
	run := func(t *testing.T, s *scenarios.Scenario) []string {
		t.Helper()
		var unfired []string
		synctest.Test(t, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(s)})
			require.Empty(t, res.Error)
			assert.True(t, res.Pass, "%v", res.Reasons)
			unfired = res.Unfired
		})
		return unfired
	}

	s := *base
	s.Invariants = append(s.Invariants,
		// A typo in a key of a map (annotations): no schema can refuse it.
		scenarios.Invariant{Name: "typo", Select: deployments, Rule: "object.metadata.annotations['converge.dev/max-replica'] != ''"},
		scenarios.Invariant{Name: "nothing-selected", Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment", Labels: "app=nowhere"}, Rule: "true"},
		scenarios.Invariant{Name: "sound", Select: deployments, Rule: "object.spec.replicas >= 0"},
	)
	require.Empty(t, s.Writes)
	s.Writes = []scenarios.WriteRule{{Select: deployments}, {Select: scenarios.Selector{APIVersion: "v1", Kind: "ConfigMap"}}}
	unfired := run(t, &s)
	assert.Contains(t, unfired, "invariant typo (never true or false: each Deployment it selected lacked a field its rule reads)")
	assert.Contains(t, unfired, "invariant nothing-selected (selected no Deployment)")
	assert.Contains(t, unfired, "write rule 1 (selected no write of a ConfigMap)")
	for _, u := range unfired {
		assert.NotContains(t, u, "sound", "an invariant that was judged is not vacuous")
	}

	// Said to be allowed, they are not reported.
	for i := range s.Invariants {
		s.Invariants[i].MayBeVacuous = true
	}
	for i := range s.Writes {
		s.Writes[i].MayBeVacuous = true
	}
	assert.Empty(t, run(t, &s))
}

// A rule found false says what it read, so the user sees why.
func TestAFalseRuleSaysWhatItRead(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s := *base
	s.Invariants = append(s.Invariants, scenarios.Invariant{Name: "never-scaled", Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"},
		Rule: "object.spec.replicas <= 1 || object.metadata.name == 'none'"})
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		require.False(t, res.Pass)
		i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == "never-scaled" })
		require.GreaterOrEqual(t, i, 0, "%v", res.Reasons)
		assert.Regexp(t, `is false \(it read object\.spec\.replicas = [0-9]+, object\.metadata\.name = "web-[0-9]+"\)$`, res.Findings[i].Detail)
	})
}

// creator creates ConfigMaps without end, a tenth of a second apart: the
// clock moves, so only the count of what it created can tell.
type creator struct{}

func (creator) Name() string { return "creator" }
func (creator) New(in scenarios.Instance) (scenarios.Runner, error) {
	return runnerFunc(func(ctx context.Context) error {
		for ctx.Err() == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "more-"}}
			_, _ = in.Client.CoreV1().ConfigMaps(in.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	}), nil
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// A controller that creates without end is a hot loop, and its run ends
// there rather than at its deadline.
func TestCreatingWithoutEndIsAHotLoop(t *testing.T) {
	s, err := scenarios.Parse("creates.yaml", []byte(`
name: creates
catches: a controller that creates without end
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, name: a}
      count: 1
timing: {deadline: 1h, settle: 50m}
`))
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: creator{}})
		require.Empty(t, res.Error)
		require.False(t, res.Pass)
		i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == "no-hot-loop" })
		require.GreaterOrEqual(t, i, 0, "%v", res.Reasons)
		assert.Equal(t, "2000 objects created: the controller creates without end", res.Findings[i].Detail)
		assert.Less(t, time.Duration(res.Simulated), 10*time.Minute, "the run ended at the hot loop")
	})
}

// A goal condition reads the other objects as an invariant does; one that
// reads oldObject, or a kind the scenario does not watch, is refused.
func TestGoalConditionReadsObjects(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s := *base
	s.Goal.Objects = append(slices.Clone(s.Goal.Objects), scenarios.Expectation{
		Select:    scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-0"},
		Condition: "objects.Deployment.all(d, d.spec.replicas >= 1) && size(objects.Deployment) > 1",
	})
	require.NoError(t, s.Validate())
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		assert.True(t, res.Pass, "%v", res.Reasons)
	})

	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "objects.Deployment.size() == 0"
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		assert.False(t, res.Pass, "a condition on the other objects that never holds fails the goal")
	})

	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "object.spec.replicas >= oldObject.spec.replicas"
	assert.ErrorContains(t, s.Validate(), "not oldObject")
	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "size(objects.Widget) == 0"
	assert.ErrorContains(t, s.Validate(), "objects.Widget: the scenario names no kind Widget")
}

// Interference sets any JSON value, or removes a field; a write the API
// server refuses ends the run as the harness's error, naming the step and
// the answer, never as a verdict on the controller.
func TestInterferenceSetsAnyValue(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	deployments := scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}
	run := func(t *testing.T, in scenarios.Interference) *reports.Result {
		s := *base
		s.World.Interference = []scenarios.Interference{in}
		require.NoError(t, s.Validate())
		var res *reports.Result
		synctest.Test(t, func(t *testing.T) {
			res = scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		})
		return res
	}
	logged := func(res *reports.Result, what string) bool {
		return slices.ContainsFunc(res.History.Log, func(e reports.Entry) bool { return strings.Contains(e.What, what) })
	}

	res := run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "spec.minReadySeconds", Value: 7}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: set spec.minReadySeconds of Deployment web-0"), "%v", res.History.Log)

	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "metadata.annotations", Remove: true}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: remove metadata.annotations of Deployment web-0"), "%v", res.History.Log)

	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "spec.replicas", Value: "many"}})
	require.False(t, res.Pass)
	assert.Contains(t, res.Error, "interference 0 could not set spec.replicas of Deployment web-0: the API server answered:")
	for _, f := range res.Findings {
		assert.Equal(t, reports.KindHarness, f.Kind, "no verdict on the controller: %+v", f)
	}

	s := *base
	s.World.Interference = []scenarios.Interference{{Every: scenarios.Duration(time.Second), Select: deployments, Set: &scenarios.SetField{Path: "spec.replicas"}}}
	assert.ErrorContains(t, s.Validate(), "give a value, or remove: true")
}
