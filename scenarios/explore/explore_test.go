package explore

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

func TestMasks(t *testing.T) {
	m := DefaultMasks().With(Masks{Paths: []string{"Widget:spec.noise", "status.flaky"}})
	require.NoError(t, m.Validate())
	for _, c := range []struct {
		kind, field string
		masked      bool
	}{
		{"apps/v1 Deployment", "metadata.uid", true},
		{"v1 ConfigMap", "metadata.managedFields[*].time", true},
		{"x/v1 Mirror", "status.sourceResourceVersion", true},
		{"x/v1 Widget", "spec.noise.level", true},
		{"x/v1 Gadget", "spec.noise.level", false},
		{"x/v1 Gadget", "status.flaky[*]", true},
		{"x/v1 Gadget", "status.flakyNot", false},
		{"coordination.k8s.io/v1 Lease", "spec.holderIdentity", true},
		{"apps/v1 Deployment", "spec.replicas", false},
	} {
		assert.Equal(t, c.masked, m.masked(c.kind, c.field), "%s %s", c.kind, c.field)
	}
	for _, bad := range []Masks{{Keys: []string{"a.b"}}, {Keys: []string{"*"}}, {Paths: []string{""}}, {Paths: []string{"Kind:"}}} {
		assert.Error(t, bad.Validate(), "%+v", bad)
	}
	assert.True(t, globMatch("*ResourceVersion", "sourceResourceVersion"))
	assert.True(t, globMatch("a*c*e", "abcde"))
	assert.False(t, globMatch("a*c*e", "abcd"))
}

func TestFlattenKeepsPresenceOfTimes(t *testing.T) {
	got := flatten(map[string]any{"a": map[string]any{"b": []any{int64(1), "2026-12-02T10:00:00Z"}}, "empty": map[string]any{}, "n": nil})
	assert.Equal(t, map[string]string{"a.b[0]": "1", "a.b[1]": `"<time>"`, "empty": "{}", "n": "null"}, got)
	assert.Equal(t, "a.b[*].c[*]", field("a.b[0].c[12]"))
}

// A number flattens as JSON writes it, whether the object held it as a
// run does (int64) or as a result read back from its file does (float64).
func TestFlattenNumbersAsJSON(t *testing.T) {
	for _, n := range []struct {
		asRun, asRead any
		want          string
	}{
		{int64(2), float64(2), "2"},
		{int64(1048576), float64(1048576), "1048576"},
		{int64(1) << 40, float64(int64(1) << 40), "1099511627776"},
		{int(-3), float64(-3), "-3"},
		{float64(0.25), float64(0.25), "0.25"},
	} {
		run := flatten(map[string]any{"spec": map[string]any{"n": n.asRun}})
		read := flatten(map[string]any{"spec": map[string]any{"n": n.asRead}})
		assert.Equal(t, map[string]string{"spec.n": n.want}, run, "%T %v", n.asRun, n.asRun)
		assert.Equal(t, run, read, "%v", n.asRun)
	}
}

func TestTargetOfAFiring(t *testing.T) {
	for request, want := range map[string]chaos.Target{
		"patch deployments converge/web-1":        {Verbs: []string{"patch"}, Resource: "deployments", Name: "web-1"},
		"update deployments/status ns/web-1":      {Verbs: []string{"update"}, Resource: "deployments", Name: "web-1"},
		"ADDED watch pods converge/web-1-x":       {Resource: "pods", Name: "web-1-x"},
		"list pods converge/":                     {Verbs: []string{"list"}, Resource: "pods"},
		"create configmaps cluster-scoped-object": {Verbs: []string{"create"}, Resource: "configmaps", Name: "cluster-scoped-object"},
	} {
		got, ok := targetOf(request)
		require.True(t, ok, request)
		assert.Equal(t, want, got, request)
	}
	for _, bad := range []string{"", "schedule", "frobnicate pods x"} {
		_, ok := targetOf(bad)
		assert.False(t, ok, bad)
	}
}

// ddmin ends 1-minimal: here the failure needs two faults together.
func TestShrinkFindsThePairToBlame(t *testing.T) {
	var faults []chaos.Spec
	for i := range 16 {
		faults = append(faults, chaos.Spec{Fault: "conflict", Target: chaos.Target{Name: string(rune('a' + i))}, When: chaos.When{After: time.Duration(i) * time.Second, Count: 3}})
	}
	has := func(c []chaos.Spec, name string) bool {
		for _, f := range c {
			if f.Target.Name == name {
				return true
			}
		}
		return false
	}
	runs := 0
	s := &Shrinker{Fails: func(c []chaos.Spec, _ int) ([]uint64, int, error) {
		runs++
		if has(c, "c") && has(c, "k") {
			return []uint64{7, 8, 9}, Tries, nil
		}
		return nil, Tries, nil
	}}
	r := &reports.Result{Plan: faults, Reasons: []string{"goal"}}
	out, err := s.Shrink(r)
	require.NoError(t, err)
	require.Len(t, out.Faults, 2)
	assert.Equal(t, "c", out.Faults[0].Target.Name)
	assert.Equal(t, "k", out.Faults[1].Target.Name)
	// Simplified: no start bound, one firing.
	assert.Equal(t, chaos.When{Count: 1}, out.Faults[0].When)
	assert.Equal(t, runs, out.Candidates, "each candidate ran once: the cache answered repeats")
	assert.Equal(t, runs*Tries, out.Runs)
	assert.Equal(t, Tries, out.Need)
	assert.Equal(t, uint64(7), out.Seed)
	assert.False(t, out.Exhausted)

	_, err = (&Shrinker{Fails: s.Fails}).Shrink(&reports.Result{Pass: true})
	assert.ErrorContains(t, err, "passed")
	_, err = (&Shrinker{Fails: func([]chaos.Spec, int) ([]uint64, int, error) { return nil, Tries, nil }}).Shrink(r)
	assert.ErrorContains(t, err, "did not reproduce")
	out, err = (&Shrinker{Fails: s.Fails, MaxCandidates: 3}).Shrink(r)
	require.NoError(t, err)
	assert.True(t, out.Exhausted)
}

// A fault that fails one run in three does not take the blame for a
// failure seen in every run; when the failure itself shows in one run in
// three, one failing run is enough, and the replay names that run's seed.
func TestShrinkKeepsTheFailureAsReliable(t *testing.T) {
	faults := []chaos.Spec{
		{Fault: "conflict", Target: chaos.Target{Name: "web-1"}, When: chaos.When{Count: 1}},
		{Fault: "watch-close", Target: chaos.Target{Resource: "deployments"}, When: chaos.When{Count: 1}},
		{Fault: "watch-duplicate", Target: chaos.Target{Resource: "pods"}, When: chaos.When{Count: 1}},
	}
	has := func(c []chaos.Spec, fault string) bool {
		return slices.ContainsFunc(c, func(f chaos.Spec) bool { return f.Fault == fault })
	}
	r := &reports.Result{Plan: faults, Reasons: []string{"budget"}}
	// The conflict fails every run; the closed watch fails the second seed.
	reliable := func(c []chaos.Spec, need int) ([]uint64, int, error) {
		switch {
		case has(c, "conflict"):
			return []uint64{1, 2, 3}, Tries, nil
		case has(c, "watch-close"):
			return []uint64{2}, Tries, nil
		}
		return nil, Tries, nil
	}
	out, err := (&Shrinker{Fails: reliable}).Shrink(r)
	require.NoError(t, err)
	require.Len(t, out.Faults, 1)
	assert.Equal(t, "conflict", out.Faults[0].Fault)
	assert.Equal(t, Tries, out.Need)
	assert.Equal(t, uint64(1), out.Seed)

	// Only the closed watch and the conflict together fail, and only the
	// third seed: that pair, replayed with seed 3.
	flaky := func(c []chaos.Spec, need int) ([]uint64, int, error) {
		if has(c, "conflict") && has(c, "watch-close") {
			return []uint64{3}, Tries, nil
		}
		return nil, Tries, nil
	}
	out, err = (&Shrinker{Fails: flaky}).Shrink(r)
	require.NoError(t, err)
	require.Len(t, out.Faults, 2)
	assert.Equal(t, 1, out.Need)
	assert.Equal(t, uint64(3), out.Seed)
}

// The verdict's differences are read from the findings' fields: the goal
// carries its own sentence, a budget says what it counts.
func TestVerdictDifferencesReadFindings(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &reports.Result{Started: start, Findings: []reports.Finding{
		{Check: reports.CheckGoal, Kind: reports.KindGoal, Within: reports.Duration(time.Minute), Detail: "web: 1 of 3 ready"},
		{Check: "no-hot-loop", Kind: reports.KindInvariant, At: start.Add(time.Second), Subject: reports.Subject{Name: "web"}, Detail: "spins"},
		{Check: reports.CheckBudgetRequests, Kind: reports.KindBudget, Key: "list pods", Count: 9, Limit: 3},
		{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: "fault 0 (conflict)"},
	}}
	got := RefOutcome(r, "r.json").Differences
	assert.Equal(t, []Difference{
		{Oracle: OracleVerdict, Kind: "invariant", Field: "no-hot-loop", Object: "web", Detail: "spins"},
		{Oracle: OracleVerdict, Kind: "goal", Field: "converged", Detail: "did not converge within 1m0s: web: 1 of 3 ready"},
		{Oracle: OracleVerdict, Kind: "budget", Field: "requests", Detail: "budget: 9 list pods requests, budget 3"},
	}, got)
}

// The summary counts what pruning left out as counts, not differences.
func TestTextCountsWhatWasPruned(t *testing.T) {
	e := &Exploration{Scenario: "s", Controller: "c", Seed: 1, Coverage: Coverage{
		Found:  map[string]int{Stale: 70, Unobserved: 30},
		Steps:  []Step{{Name: "writes that failed", Before: 100, After: 100}, {Name: "repeats", Before: 100, After: 43}},
		Points: 43, Run: 43,
	}}
	text := e.Text()
	assert.Contains(t, text, "100 points found, of which pruned 57 repeats; 43 run")
	assert.NotContains(t, text, "-57")
	assert.NotContains(t, text, "writes that failed", "a pass that pruned nothing is not listed")
	assert.NotContains(t, text, "disagreed")
	e.References = []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	e.Noise = Noise{Exists: []string{"configmaps/note-1234567"}, Families: []string{"configmaps/note-"}}
	assert.Contains(t, e.Text(), "8 references disagreed on 0 fields, 1 objects, 1 name families and 0 counts: not judged")
}

// A point aims at its write by the instant the reference wrote it and its
// rank from then on, and an injector so aimed hits that write in a run
// where the controller wrote the object once more before it (two
// reconciles of one instant racing); counted from the start it hit the
// extra one.
func TestPointsAimAtTheirInstant(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	write := func(d time.Duration, code int) reports.Request {
		return reports.Request{At: at(d), Verb: "update", Resource: "configmaps", Name: "shop-config", Code: code}
	}
	ref := &reports.Result{Started: t0, History: reports.History{Start: t0,
		Lives:    []reports.Life{{Started: at(200 * time.Millisecond)}},
		Requests: []reports.Request{write(8*time.Second, 200), write(8*time.Second, 200), write(16*time.Second, 200)}}}
	points, _, _ := enumerate(ref, func(string) bool { return true })
	var conflicts []chaos.When
	for _, p := range points {
		if p.Fault.Fault == chaos.FaultConflict {
			conflicts = append(conflicts, p.Fault.When)
		}
	}
	origin := 200 * time.Millisecond
	assert.Equal(t, []chaos.When{
		{After: 8*time.Second - origin - aimSlack, Nth: 1},
		{After: 8*time.Second - origin - aimSlack, Nth: 2},
		{After: 16*time.Second - origin - aimSlack, Nth: 1},
	}, conflicts)

	// A run that writes the object twice at 8 s where the reference wrote it
	// once: the point found at 16 s still meets the write at 16 s.
	once := &reports.Result{Started: t0, History: reports.History{Start: t0,
		Lives:    []reports.Life{{Started: at(origin)}},
		Requests: []reports.Request{write(8*time.Second, 200), write(16*time.Second, 200)}}}
	points, _, _ = enumerate(once, func(string) bool { return true })
	i := slices.IndexFunc(points, func(p Point) bool {
		return p.Fault.Fault == chaos.FaultConflict && p.At == reports.Duration(16*time.Second)
	})
	require.GreaterOrEqual(t, i, 0)
	clk := testingclock.NewFakeClock(t0.Add(origin))
	inj, err := chaos.NewInjector(chaos.Plan{Clock: clk, Injections: []chaos.Injection{{
		Fault: chaos.Conflict(chaos.Target{Resource: "configmaps", Name: "shop-config", Verbs: []string{"update"}}), When: points[i].Fault.When}}})
	require.NoError(t, err)
	rt := inj.Wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	var refused []time.Duration
	for _, d := range []time.Duration{8 * time.Second, 8 * time.Second, 16 * time.Second} {
		clk.SetTime(at(d))
		req := httptest.NewRequest(http.MethodPut, "https://k8s/api/v1/namespaces/a/configmaps/shop-config", http.NoBody)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		if resp.StatusCode == http.StatusConflict {
			refused = append(refused, d)
		}
	}
	assert.Equal(t, []time.Duration{16 * time.Second}, refused, "the write the point was found at")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
