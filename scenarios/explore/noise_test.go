package explore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func copierScenario(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Load("testdata/copier.yaml")
	require.NoError(t, err)
	return s
}

// configMaps is a run that ended with these ConfigMaps (name -> data) and
// saw these events (name -> added, deleted).
func configMaps(end map[string]map[string]any, events map[string]EventCount) *reports.Result {
	r := &reports.Result{Started: t0, Converged: true, History: reports.History{Start: t0, Resources: map[string]string{"configmaps": "v1 ConfigMap"}}}
	for _, name := range sortedKeys(end) {
		r.History.End = append(r.History.End, reports.EndObject{Kind: "v1 ConfigMap", Name: name,
			Object: map[string]any{"metadata": map[string]any{"name": name}, "data": end[name]}})
	}
	for _, name := range sortedKeys(events) {
		for range events[name].Added {
			r.History.Events = append(r.History.Events, reports.WatchEvent{Type: "ADDED", Resource: "configmaps", Name: name, Kind: "v1 ConfigMap"})
		}
		for range events[name].Deleted {
			r.History.Events = append(r.History.Events, reports.WatchEvent{Type: "DELETED", Resource: "configmaps", Name: name, Kind: "v1 ConfigMap"})
		}
	}
	return r
}

// Each kind of disagreement is noise; what every reference agrees on is
// not.
func TestNoiseIsWhatTheReferencesDisagreeOn(t *testing.T) {
	refs := []*reports.Result{
		configMaps(map[string]map[string]any{"copy-a": {"v": "2", "token": "x"}, "note-1234567": {"v": "2"}},
			map[string]EventCount{"copy-a": {1, 0}, "copy-b": {1, 1}, "note-1234567": {1, 0}}),
		configMaps(map[string]map[string]any{"copy-a": {"v": "2", "token": "y"}, "note-7654321": {"v": "2"}},
			map[string]EventCount{"copy-a": {2, 1}, "copy-b": {1, 1}, "note-7654321": {1, 0}}),
	}
	n := noiseOf(refs, DefaultMasks())
	assert.Equal(t, Noise{
		Fields:   []string{"ConfigMap:data.token"},
		Exists:   []string{"configmaps/note-1234567", "configmaps/note-7654321"},
		Families: []string{"configmaps/note-"},
		Counts:   []string{"configmaps/copy-a"},
	}, n)
	assert.False(t, n.Empty())
	assert.True(t, noiseOf(refs[:1], DefaultMasks()).Empty(), "one run disagrees with nothing")
	assert.True(t, noiseOf([]*reports.Result{refs[0], refs[0]}, DefaultMasks()).Empty())
	masked := DefaultMasks().With(Masks{Paths: []string{"ConfigMap:data.token"}})
	assert.Empty(t, noiseOf(refs, masked).Fields, "a masked field is not noise")
}

// Agreeing references call for no more; disagreeing ones for a batch of
// the base count at a time, in the base mix, until a batch shows nothing
// new or three times the base count ran.
func TestMoreReferencesWhileTheyDisagree(t *testing.T) {
	s := &scenarios.Scenario{Name: "s"}
	same := configMaps(map[string]map[string]any{"a": {"v": "1"}}, map[string]EventCount{"a": {1, 0}})
	other := func(v string) *reports.Result {
		return configMaps(map[string]map[string]any{"a": {"v": v}}, map[string]EventCount{"a": {1, 0}})
	}
	agree := []*reports.Result{same, same, same, same}
	assert.Empty(t, MoreReferences(s, 10, 4, agree, Masks{}))

	disagree := []*reports.Result{same, other("2"), same, same}
	more := MoreReferences(s, 10, 4, disagree, Masks{})
	require.Len(t, more, 4)
	for i, want := range []time.Duration{0, 0, restartAfter, 3 * restartAfter} {
		assert.Equal(t, uint64(14+i), more[i].Seed)
		assert.Equal(t, want, time.Duration(more[i].Scenario.Controller.StartAfter), "reference %d starts as the base's %d", 4+i, i)
	}
	// A second batch that shows the same disagreement ends it; one that
	// shows a new one calls for a third, and the third is the last.
	assert.Empty(t, MoreReferences(s, 10, 4, append(disagree, same, same, same, same), Masks{}))
	eight := append(disagree, same, same, same, other("3"))
	assert.Empty(t, MoreReferences(s, 10, 4, eight, Masks{}), "a new value of a noisy field is no new noise")
	eight = append(disagree, same, same, same, configMaps(map[string]map[string]any{"a": {"v": "1", "w": "x"}}, map[string]EventCount{"a": {1, 0}}))
	assert.Len(t, MoreReferences(s, 10, 4, eight, Masks{}), 4, "a new noisy field: noise is not settled")
	withNewCount := append(disagree, same, same, same, configMaps(map[string]map[string]any{"a": {"v": "1"}}, map[string]EventCount{"a": {2, 1}}))
	assert.Len(t, MoreReferences(s, 10, 4, withNewCount, Masks{}), 4)
	assert.Empty(t, MoreReferences(s, 10, 4, append(eight, same, same, same, other("4")), Masks{}), "three times the base count at most")
	// A failing reference ends the exploration: no more runs.
	failing := other("2")
	failing.Findings = []reports.Finding{{Check: "no-panic", Kind: reports.KindInvariant}}
	assert.Empty(t, MoreReferences(s, 10, 4, []*reports.Result{same, failing, same, same}, Masks{}))
}

// The plan judges by noise: a field, an object, a randomly named one and
// a count the references disagreed on are no difference; the same on what
// they agreed on is.
func TestJudgeSkipsNoise(t *testing.T) {
	refs := []*reports.Result{
		configMaps(map[string]map[string]any{"copy-a": {"v": "2", "token": "x"}, "note-1234567": {"v": "2"}, "maybe": {}},
			map[string]EventCount{"copy-a": {1, 0}, "copy-b": {1, 1}}),
		configMaps(map[string]map[string]any{"copy-a": {"v": "2", "token": "y"}, "note-7654321": {"v": "2"}},
			map[string]EventCount{"copy-a": {2, 1}, "copy-b": {1, 1}}),
	}
	for _, r := range refs {
		for _, name := range []string{"copy-a", "copy-b"} {
			r.History.Requests = append(r.History.Requests, reports.Request{Verb: "create", Resource: "configmaps", Name: name, Code: 201})
		}
		r.History.Requests = append(r.History.Requests, reports.Request{Verb: "delete", Resource: "configmaps", Name: "copy-b", Code: 200})
	}
	p, err := NewPlan(copierScenario(t), "fake", 1, refs, Masks{})
	require.NoError(t, err)
	assert.Equal(t, map[string][]EventCount{"configmaps/copy-b": {{1, 1}}}, p.Counts, "only agreed counts are judged")

	noisy := configMaps(map[string]map[string]any{"copy-a": {"v": "2", "token": "z"}, "note-5555555": {"v": "2"}},
		map[string]EventCount{"copy-a": {3, 2}, "copy-b": {1, 1}})
	assert.Empty(t, p.Judge(noisy))

	wrong := configMaps(map[string]map[string]any{"copy-a": {"v": "1", "token": "z"}, "note-5555555": {"v": "2"}, "copy-d": {}},
		map[string]EventCount{"copy-a": {1, 0}, "copy-b": {2, 2}})
	var got []string
	for _, d := range p.Judge(wrong) {
		got = append(got, d.Oracle+" "+d.Field+" "+d.Object)
	}
	assert.ElementsMatch(t, []string{"end-state data.v copy-a", "end-state (exists) copy-d", "events added/deleted configmaps/copy-b"}, got)
}

// The points' processes judge their runs, which hold their objects' whole
// numbers as int64, against a plan read back from its file, whose
// references hold them as float64: a large number is the same number
// (fmt wrote float64(1200000) as 1.2e+06, a difference on every point).
func TestJudgeAgainstAPlanReadBack(t *testing.T) {
	big := func(token string) *reports.Result {
		return configMaps(map[string]map[string]any{"copy-a": {"deadline": int64(1200000), "ratio": 0.5, "token": token}}, map[string]EventCount{"copy-a": {1, 0}})
	}
	p, err := NewPlan(copierScenario(t), "fake", 1, []*reports.Result{big("x"), big("y")}, Masks{})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, p.Write(path))
	read, err := ReadPlan(path)
	require.NoError(t, err)
	require.IsType(t, float64(0), read.References[0].History.End[0].Object["data"].(map[string]any)["deadline"])
	assert.Empty(t, read.Judge(big("z")))
	wrong := big("z")
	wrong.History.End[0].Object["data"].(map[string]any)["deadline"] = int64(1200001)
	var got []string
	for _, d := range read.Judge(wrong) {
		got = append(got, d.Oracle+" "+d.Field+" "+d.Detail)
	}
	assert.Equal(t, []string{"end-state data.deadline ConfigMap copy-a: data.deadline is 1200001, the references' 1200000"}, got)
}

// The fault's duration is read from the run: its firings, its hold, the
// relist after a lost watch frame, the successor after a crash.
func TestFaultEffectIsReadFromTheRun(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(10*time.Second + d) }
	firings := func(ds ...time.Duration) []chaos.Firing {
		var out []chaos.Firing
		for _, d := range ds {
			out = append(out, chaos.Firing{At: at(d)})
		}
		return out
	}
	for _, c := range []struct {
		name            string
		fault           chaos.Spec
		h               reports.History
		effect, backoff time.Duration
	}{
		{"one conflict", chaos.Spec{Fault: chaos.FaultConflict}, reports.History{Faults: firings(0)}, 0, 0},
		{"a storm, backing off", chaos.Spec{Fault: chaos.FaultServerError, Code: 503},
			reports.History{Faults: firings(0, 5*time.Millisecond, 15*time.Millisecond, 35*time.Millisecond)}, 35 * time.Millisecond, 40 * time.Millisecond},
		{"throttled", chaos.Spec{Fault: chaos.FaultThrottle, RetryAfter: 3}, reports.History{Faults: firings(0)}, 3 * time.Second, 0},
		{"an event held back", chaos.Spec{Fault: chaos.FaultWatchDelay, Delay: 2 * time.Second}, reports.History{Faults: firings(0)}, 2 * time.Second, 0},
		{"a lost frame, relisted", chaos.Spec{Fault: chaos.FaultWatchLost, Target: chaos.Target{Resource: "pods"}}, reports.History{Faults: firings(0),
			Requests: []reports.Request{{At: at(time.Second), Verb: "list", Resource: "deployments"}, {At: at(1500 * time.Millisecond), Verb: "list", Resource: "pods"}}},
			1500 * time.Millisecond, 0},
		{"a crash, replaced", chaos.Spec{Fault: chaos.FaultCrash}, reports.History{Faults: firings(0),
			Lives: []reports.Life{{Instance: 0, Started: t0, Ended: at(0)}, {Instance: 1, Started: at(5 * time.Second)}},
			Polls: []reports.Poll{{At: at(time.Second)}, {At: at(5 * time.Second), Replacing: true, Live: 1}, {At: at(5250 * time.Millisecond), Live: 1}}},
			5250 * time.Millisecond, 0},
		{"did not fire", chaos.Spec{Fault: chaos.FaultConflict}, reports.History{}, 0, 0},
	} {
		effect, backoff := faultEffect(c.fault, &reports.Result{Started: t0, History: c.h}, c.h.Faults)
		assert.Equal(t, c.effect, effect, c.name)
		assert.Equal(t, c.backoff, backoff, c.name)
	}
}

// A run is late past the latest reference (its late start taken off), the
// spread of the prompt ones, the fault's duration and backoff, and the
// goal's poll period, when the controller also waited longer than the
// references did; not before.
func TestLateIsPastEverythingTheReferencesAndTheFaultAllow(t *testing.T) {
	// run converged at converged, its controller started at start and
	// sent a request every second, and none for idle before the last.
	run := func(start, converged, idle time.Duration) *reports.Result {
		r := configMaps(nil, nil)
		r.TimeToConverge = reports.Duration(converged)
		r.History.Lives = []reports.Life{{Started: t0.Add(start)}}
		for at := start; at == start || at < converged-idle; at += time.Second {
			r.History.Requests = append(r.History.Requests, reports.Request{At: t0.Add(at), Verb: "get", Resource: "configmaps"})
		}
		r.History.Requests = append(r.History.Requests,
			reports.Request{At: t0.Add(converged), Verb: "update", Resource: "configmaps"},
			reports.Request{At: t0.Add(converged + time.Hour), Verb: "get", Resource: "configmaps"}) // after: not counted
		return r
	}
	refs := []*reports.Result{run(100*time.Millisecond, 9*time.Second, 2*time.Second), run(100*time.Millisecond, 10*time.Second, 0),
		run(5100*time.Millisecond, 16*time.Second, 0), run(15100*time.Millisecond, 24*time.Second, 0)}
	p, err := NewPlan(copierScenario(t), "fake", 1, refs, Masks{})
	require.NoError(t, err)
	p.learnOnce.Do(p.learn)
	// Latest: the 5 s late one, 16 - 5 = 11 s; spread: 10 - 9 = 1 s; the
	// longest wait, the first one's: 2 s and the second before it.
	assert.Equal(t, baseline{latest: 11 * time.Second, spread: time.Second, idle: 2900 * time.Millisecond, ok: true}, p.baseline)

	point := func(converged, idle time.Duration, fault chaos.Spec, fs ...time.Duration) *reports.Result {
		r := run(100*time.Millisecond, converged, idle)
		r.Plan = []chaos.Spec{fault}
		for _, d := range fs {
			r.History.Faults = append(r.History.Faults, chaos.Firing{At: t0.Add(d)})
		}
		return r
	}
	conflict := chaos.Spec{Fault: chaos.FaultConflict}
	allowed := 12*time.Second + scenarios.Poll
	idle := 20 * time.Second
	_, late := p.late(point(allowed, idle, conflict, 3*time.Second))
	assert.False(t, late, "at the allowance")
	d, late := p.late(point(allowed+time.Millisecond, idle, conflict, 3*time.Second))
	require.True(t, late, "past it")
	assert.Equal(t, OracleLiveness, d.Oracle)
	assert.Equal(t, reports.Duration(allowed), d.Lateness.Allowed)
	_, late = p.late(point(allowed+time.Second, 2*time.Second, conflict, 3*time.Second))
	assert.False(t, late, "late, but no idler than the references: the world's timing")

	storm := chaos.Spec{Fault: chaos.FaultServerError, Code: 503}
	_, late = p.late(point(allowed+3*time.Second, idle, storm, 3*time.Second, 4*time.Second, 5*time.Second))
	assert.False(t, late, "2 s of errors and 2 s of backoff allowed")
	_, late = p.late(point(allowed+4*time.Second+time.Millisecond, idle, storm, 3*time.Second, 4*time.Second, 5*time.Second))
	assert.True(t, late)

	unconverged := point(0, 0, conflict, 3*time.Second)
	unconverged.Converged = false
	_, late = p.late(unconverged)
	assert.False(t, late, "the verdict's goal judges a run that did not converge")
}

// A run under several faults (a fault profile's) is weighed by each
// fault's own firings: the effect runs from the first firing of any to
// the latest end of theirs, and the backoff is the largest one's.
func TestLateWeighsEveryFaultOfAPlan(t *testing.T) {
	run := func(converged, idle time.Duration) *reports.Result {
		r := configMaps(nil, nil)
		r.Converged, r.TimeToConverge = true, reports.Duration(converged)
		r.History.Lives = []reports.Life{{Started: t0}}
		for at := time.Duration(0); at == 0 || at < converged-idle; at += time.Second {
			r.History.Requests = append(r.History.Requests, reports.Request{At: t0.Add(at), Verb: "get", Resource: "configmaps"})
		}
		r.History.Requests = append(r.History.Requests, reports.Request{At: t0.Add(converged), Verb: "update", Resource: "configmaps"})
		return r
	}
	refs := []*reports.Result{run(5*time.Second, 0), run(5*time.Second, 0)}
	// A conflict at 1 s and 3 s (backoff 4 s), an event held back 10 s
	// from 2 s: held from 1 s to 12 s, 11 s.
	under := func(converged, idle time.Duration) *reports.Result {
		r := run(converged, idle)
		r.Plan = []chaos.Spec{{Fault: chaos.FaultConflict}, {Fault: chaos.FaultWatchDelay, Delay: 10 * time.Second}}
		r.History.Faults = []chaos.Firing{{At: t0.Add(time.Second), Fault: chaos.FaultConflict},
			{At: t0.Add(2 * time.Second), Fault: chaos.FaultWatchDelay}, {At: t0.Add(3 * time.Second), Fault: chaos.FaultConflict}}
		return r
	}
	allowed := 5*time.Second + 11*time.Second + 4*time.Second + scenarios.Poll
	_, late := Late(refs, under(allowed, 30*time.Second))
	assert.False(t, late, "at the allowance")
	d, late := Late(refs, under(allowed+time.Millisecond, 30*time.Second))
	require.True(t, late, "past it")
	assert.Equal(t, reports.Duration(11*time.Second), d.Lateness.Fault)
	assert.Equal(t, reports.Duration(4*time.Second), d.Lateness.Backoff)
	assert.Contains(t, d.Detail, "the faults held the controller back 11s")

	quiet := run(allowed+time.Minute, 30*time.Second)
	_, late = Late(refs, quiet)
	assert.False(t, late, "no fault fired: a reference, not judged")
	_, late = Late(append(refs, func() *reports.Result { r := run(time.Second, 0); r.Converged = false; return r }()), under(allowed+time.Minute, 30*time.Second))
	assert.False(t, late, "a reference that did not converge says nothing of when a run should")
}
