package explore_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// The webapp's input points are drawn from its CRD's schema; a correct
// operator changed by one of them ends as a run created with the changed
// input does, and two different inputs' ends differ where the operator
// writes what the input says.
func TestAnInputChangeEndsAsACreatedOne(t *testing.T) {
	s, err := scenarios.Load("../../examples/webapp/scenarios/webapp.yaml")
	require.NoError(t, err)
	ctl, err := webapp.UnderTest("")
	require.NoError(t, err)
	run := func(s *scenarios.Scenario, seed uint64) *reports.Result {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: ctl, EndState: true})
		require.Empty(t, res.Error)
		require.True(t, res.Pass, "%s: %v", s.Name, res.Reasons)
		return res
	}
	refs := []*reports.Result{run(s, 1), run(s, 2)}
	points, err := explore.InputPoints(s, refs, explore.InputRules{})
	require.NoError(t, err)
	var paths []string
	singles, chains, refused := 0, map[int]int{}, 0
	for _, pt := range points {
		assert.Equal(t, "WebApp", pt.Kind)
		assert.Equal(t, "shop", pt.Name)
		require.NotEmpty(t, pt.Changes)
		require.Len(t, pt.Writes, len(pt.Changes), "a write per change")
		assert.Greater(t, time.Duration(pt.At), time.Duration(refs[0].TimeToConverge))
		for _, c := range pt.Changes {
			assert.False(t, c.Invalid)
		}
		if r := pt.Refused; r != nil {
			refused++
			assert.True(t, r.Change.Invalid, r.Change.String())
			assert.False(t, slices.ContainsFunc(pt.Writes, func(w explore.InputWrite) bool { return w.Field == r.Write.Field }), "a field the point leaves alone")
		}
		if len(pt.Changes) > 1 {
			chains[len(pt.Changes)]++
			continue
		}
		singles++
		if !slices.Contains(paths, pt.Changes[0].Path) {
			paths = append(paths, pt.Changes[0].Path)
		}
	}
	assert.Subset(t, paths, []string{"spec.replicas", "spec.port", "spec.image"}, "%v", paths)
	// Chains of two and three changes, as many as the single changes.
	assert.Positive(t, chains[2])
	assert.Positive(t, chains[3])
	assert.Equal(t, singles, chains[2]+chains[3])
	assert.Len(t, chains, 2, "chains of two or three changes only")
	// Each single change is sent beside a change the schema refuses; a
	// chain may touch every field the refused changes are of.
	assert.GreaterOrEqual(t, refused, singles)
	for _, pt := range points {
		assert.True(t, pt.Refused != nil || len(pt.Changes) > 1, pt.Signature())
	}
	points = slices.DeleteFunc(points, func(pt explore.InputPoint) bool { return len(pt.Changes) > 1 })

	replicas := func(n int64) explore.InputPoint {
		i := slices.IndexFunc(points, func(pt explore.InputPoint) bool {
			return pt.Changes[0].Path == "spec.replicas" && pt.Changes[0].Value == n
		})
		require.GreaterOrEqual(t, i, 0, "a point sets spec.replicas to %d: %v", n, points)
		return points[i]
	}
	// The scenario's own inputs section leaves paths out.
	pinned := *s
	pinned.Inputs = scenarios.Inputs{Exclude: []string{"spec.replicas"}, Values: map[string][]any{"spec.image": {"registry.invalid/shop:2"}}}
	plan, err := explore.NewPlan(&pinned, "fake", 1, refs, explore.Masks{})
	require.NoError(t, err)
	require.NoError(t, plan.PlanInputs(explore.InputRules{}))
	assert.NotEmpty(t, plan.Inputs)
	assert.False(t, slices.ContainsFunc(plan.Inputs, func(pt explore.InputPoint) bool {
		return slices.ContainsFunc(pt.Changes, func(c explore.InputChange) bool { return c.Path == "spec.replicas" })
	}))
	assert.True(t, slices.ContainsFunc(plan.Inputs, func(pt explore.InputPoint) bool {
		return pt.Changes[0].Path == "spec.image" && pt.Changes[0].Value == "registry.invalid/shop:2"
	}), "the value the scenario gives is tried")

	up, down := replicas(3), replicas(1)
	masks := explore.DefaultMasks()
	transition, fresh := run(up.Transition(s), 1), run(up.Fresh(s), 1)
	assert.Empty(t, explore.Inconsistent(up, transition, fresh, masks))
	require.NotNil(t, up.Refused)
	assert.True(t, slices.ContainsFunc(transition.History.Log, func(e reports.Entry) bool { return strings.Contains(e.What, "refused, as it must be") }),
		"the server refused %s", up.Refused.Change)

	// An operator that ignored the change would have ended as the run
	// created with the other input did.
	other := run(down.Fresh(s), 1)
	diffs := explore.Inconsistent(up, other, fresh, masks)
	require.NotEmpty(t, diffs)
	assert.Contains(t, diffs, explore.Difference{Oracle: explore.OracleConsistency, Kind: "Deployment", Field: "spec.replicas", Object: "shop",
		Detail: "Deployment shop: spec.replicas is 1 after WebApp shop: spec.replicas set 3 (one more); a run created with that input ends with 3"})
}

// On the correct operator, no input point of its scenario ends otherwise
// than a run created with that input, and each run passes.
func TestTheCorrectWebAppIsConsistentUnderEveryInputChange(t *testing.T) {
	tier.Full(t, "every input point of the correct webapp: zoo's TestExploreInputs explores them in presubmit")
	s, err := scenarios.Load("../../examples/webapp/scenarios/webapp.yaml")
	require.NoError(t, err)
	ctl, err := webapp.UnderTest("")
	require.NoError(t, err)
	run := func(s *scenarios.Scenario, seed uint64) *reports.Result {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: ctl, EndState: true})
		require.Empty(t, res.Error)
		assert.True(t, res.Pass, "%s: %v", s.Description, res.Reasons)
		return res
	}
	refs := []*reports.Result{run(s, 1), run(s, 2)}
	points, err := explore.InputPoints(s, refs, explore.InputRules{})
	require.NoError(t, err)
	require.NotEmpty(t, points)
	for _, pt := range points {
		transition, fresh := run(pt.Transition(s), 1), run(pt.Fresh(s), 1)
		assert.Empty(t, explore.Inconsistent(pt, transition, fresh, explore.DefaultMasks()), pt.Signature())
	}
	t.Logf("%d input points", len(points))
}

// Input exploration alone, from each example's fault-free scenario, finds
// each of its input mutants, the field it mishandles named.
func TestInputPointsFindTheExamplesInputMutants(t *testing.T) {
	webappUnder := func(bug webapp.Bug) scenarios.Controller {
		c, err := webapp.UnderTest(bug)
		require.NoError(t, err)
		return c
	}
	for _, tc := range []struct {
		bug, world string
		c          scenarios.Controller
		// the change that shows it, and the difference: its oracle, kind
		// and field.
		change, oracle, kind, field string
	}{
		{string(webapp.ScaleUpOnly), "webapp", webappUnder(webapp.ScaleUpOnly), "spec.replicas set 0", explore.OracleConsistency, "Deployment", "spec.replicas"},
		// Created with the new port, the Service keeps it when the port is
		// changed back.
		{string(webapp.PortOnCreate), "webapp", webappUnder(webapp.PortOnCreate), "spec.port set", explore.OracleRecovery, "Service", "spec.ports[*].port"},
		{string(mirror.BugRemovedTargetsKept), "mirror", mirror.UnderTest{Bug: mirror.BugRemovedTargetsKept}, "spec.targets[2] remove-item", explore.OracleConsistency, "ConfigMap", "(exists)"},
		{string(mirror.BugFirstTarget), "mirror", mirror.UnderTest{Bug: mirror.BugFirstTarget}, "spec.targets remove", explore.OracleVerdict, "invariant", "no-panic"},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			s, plan, run := inputPlan(t, "../../examples/"+tc.world+"/scenarios/"+tc.world+".yaml", tc.c)
			var found []string
			for _, pt := range plan.Inputs {
				if len(pt.Changes) > 1 || !strings.Contains(pt.Signature(), tc.change) {
					continue // presubmit runs the points of the change that shows it
				}
				// As exploration runs it: one round trip, which went quiet
				// before its writes back and before its changes.
				o, ok := plan.RoundTripOutcome(pt, run(pt.RoundTrip(s), 1), "")
				require.True(t, ok, "%s: the round trip cannot stand for the point's runs", pt.Signature())
				for _, d := range o.Differences {
					if d.Oracle == tc.oracle && d.Kind == tc.kind && d.Field == tc.field {
						found = append(found, pt.Signature()+": "+d.Detail)
					}
				}
			}
			require.NotEmpty(t, found, "no point changing %s gave a %s difference of %s %s", tc.change, tc.oracle, tc.kind, tc.field)
			t.Log(found[0])
		})
	}
}

// A failing chain shrinks to the one change that fails, then to the value
// closest to the one it replaced that still fails; a candidate that
// differs from the references otherwise than the chain did does not count.
// The judge here is a stand-in: a scale-down, whatever its size, ends with
// the wrong Deployment; a new port with the wrong Service.
func TestAFailingChainShrinksToItsCause(t *testing.T) {
	s, err := scenarios.Load("../../examples/webapp/scenarios/webapp.yaml")
	require.NoError(t, err)
	ctl, err := webapp.UnderTest("")
	require.NoError(t, err)
	var refs []*reports.Result
	for seed := uint64(1); seed <= 2; seed++ {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: ctl, EndState: true})
		require.True(t, res.Pass, "%v", res.Reasons)
		refs = append(refs, res)
	}
	plan, err := explore.NewPlan(s, "fake", 1, refs, explore.Masks{})
	require.NoError(t, err)
	require.NoError(t, plan.PlanInputs(explore.InputRules{}))
	single := func(path string, value any) explore.InputPoint {
		i := slices.IndexFunc(plan.Inputs, func(pt explore.InputPoint) bool {
			return len(pt.Changes) == 1 && pt.Changes[0].Path == path && (value == nil || pt.Changes[0].Value == value)
		})
		require.GreaterOrEqual(t, i, 0, "a point changes %s", path)
		return plan.Inputs[i]
	}
	port, zero, image := single("spec.port", nil), single("spec.replicas", int64(0)), single("spec.image", nil)
	chain, ok := plan.InputPointOf(port, []explore.InputChange{zero.Changes[0], port.Changes[0], image.Changes[0]}, "c1")
	require.True(t, ok)
	require.Len(t, chain.Writes, 3)

	scaledDown := explore.Difference{Oracle: explore.OracleConsistency, Kind: "Deployment", Field: "spec.replicas", Object: "shop"}
	newPort := explore.Difference{Oracle: explore.OracleConsistency, Kind: "Service", Field: "spec.ports[*].port", Object: "shop"}
	var tried []string
	judge := func(pt explore.InputPoint) explore.Outcome {
		tried = append(tried, pt.Signature())
		o := explore.Outcome{Point: pt.Point(), Fired: true}
		for _, c := range pt.Changes {
			if v, ok := c.Value.(int64); ok && c.Path == "spec.replicas" && v < 2 {
				o.Differences = append(o.Differences, scaledDown)
			}
		}
		if len(o.Differences) == 0 && slices.ContainsFunc(pt.Changes, func(c explore.InputChange) bool { return c.Path == "spec.port" }) {
			o.Differences = append(o.Differences, newPort)
		}
		return o
	}
	failed := explore.Outcome{Point: chain.Point(), Fired: true, Differences: []explore.Difference{scaledDown}}
	small, o, runs := plan.ShrinkInput(chain, failed, judge, explore.DefaultInputShrinkRuns)
	t.Logf("tried:\n%s", strings.Join(tried, "\n"))
	require.Len(t, small.Changes, 1, small.Signature())
	assert.Equal(t, "spec.replicas", small.Changes[0].Path)
	assert.Equal(t, int64(1), small.Changes[0].Value, "one less than the 2 it replaced fails too")
	assert.Equal(t, []explore.Difference{scaledDown}, o.Differences)
	assert.Equal(t, chain.Signature(), small.ShrunkFrom)
	assert.Equal(t, 1, small.Point().Size)
	assert.Equal(t, len(tried), runs)
	assert.LessOrEqual(t, runs, explore.DefaultInputShrinkRuns)
	assert.Contains(t, small.Signature(), "spec.replicas set 1 (shrunk from 0)")

	// The first candidate, the chain without its scale-down, differed by
	// its new port: not as the chain failed, so it did not count.
	assert.Equal(t, `WebApp shop: spec.port set 1 (its minimum), then spec.image set "registry.invalid/shop:1-x" (another value)`, tried[0])

	// Within its budget: that one candidate alone leaves the chain as it
	// was.
	same, o, runs := plan.ShrinkInput(chain, failed, judge, 1)
	assert.Equal(t, 1, runs)
	assert.Equal(t, chain.Signature(), same.Signature())
	assert.Equal(t, failed, o)

	// A chain failing by its new port alone shrinks to a port one less
	// than the 8080 it replaced.
	onlyPort := explore.Outcome{Point: chain.Point(), Fired: true, Differences: []explore.Difference{newPort}}
	p2, ok := plan.InputPointOf(port, []explore.InputChange{port.Changes[0], image.Changes[0]}, "c2")
	require.True(t, ok)
	small, o, _ = plan.ShrinkInput(p2, onlyPort, judge, explore.DefaultInputShrinkRuns)
	assert.Equal(t, "WebApp shop: spec.port set 8079 (shrunk from 1)", small.Signature())
	assert.Equal(t, []explore.Difference{newPort}, o.Differences)
}

// The recovery run, read just before its writes back, ends as the
// transition run does: the same objects, beyond the masks, for every input
// point of the mirror's scenario, chains included. One whose controller
// wrote within the settle window before the writes back cannot stand for
// the transition, nor one whose writes back never came.
func TestTheRecoveryRunStandsForTheTransition(t *testing.T) {
	s, plan, run := inputPlan(t, "../../examples/mirror/scenarios/mirror.yaml", mirror.UnderTest{})
	require.NotEmpty(t, plan.Inputs)
	for _, pt := range plan.Inputs {
		recovery := run(pt.Recovery(s), 1)
		read, ok := plan.TransitionOf(pt, recovery)
		require.True(t, ok, pt.Signature())
		transition := run(pt.Transition(s), 1)
		require.NotEmpty(t, read.History.End)
		assert.Empty(t, explore.Inconsistent(pt, read, transition, explore.DefaultMasks()), pt.Signature())
		assert.Empty(t, explore.Inconsistent(pt, transition, read, explore.DefaultMasks()), pt.Signature())
		assert.Less(t, len(read.History.Requests), len(recovery.History.Requests), "%s: the writes back and what followed them are left out", pt.Signature())

		// A write of the controller within the settle window before the
		// writes back: not quiet; one just before that window: quiet.
		var back time.Time // the writes back: the last patches
		for _, e := range recovery.History.Log {
			if strings.Contains(e.What, "json patch") {
				back = e.At
			}
		}
		wroteAt := func(at time.Time) *reports.Result {
			r := *recovery
			r.History.Requests = append(slices.Clone(recovery.History.Requests), reports.Request{At: at, Verb: "update", Resource: "configmaps", Name: "copy-a", Code: 200})
			slices.SortStableFunc(r.History.Requests, func(a, b reports.Request) int { return a.At.Compare(b.At) })
			return &r
		}
		_, ok = plan.TransitionOf(pt, wroteAt(back.Add(-time.Millisecond)))
		assert.False(t, ok, "%s: a write just before the writes back", pt.Signature())
		_, ok = plan.TransitionOf(pt, wroteAt(back.Add(-time.Duration(s.Timing.Settle)-time.Millisecond)))
		assert.True(t, ok, "%s: a write before the settle window", pt.Signature())
		gone := *recovery
		gone.History.Log = slices.DeleteFunc(slices.Clone(recovery.History.Log), func(e reports.Entry) bool { return strings.Contains(e.What, "json patch") })
		_, ok = plan.TransitionOf(pt, &gone)
		assert.False(t, ok, "%s: no change made, no write back", pt.Signature())
	}
}

// The round trip, read before its writes back, ends as the fresh run does;
// before its changes, as the references did; at its end, as the fresh run
// does again: for every input point of the mirror's scenario, chains
// included. One whose controller wrote within the settle window before
// either instant cannot stand for the runs, nor one that missed a write.
func TestTheRoundTripStandsForTheRunsOfAPoint(t *testing.T) {
	s, plan, run := inputPlan(t, "../../examples/mirror/scenarios/mirror.yaml", mirror.UnderTest{})
	require.NotEmpty(t, plan.Inputs)
	masks := explore.DefaultMasks()
	for _, pt := range plan.Inputs {
		round := run(pt.RoundTrip(s), 1)
		assert.True(t, round.Pass, "%s: %v", pt.Signature(), round.Reasons)
		fresh, recovered, ok := plan.RoundTripOf(pt, round)
		require.True(t, ok, pt.Signature())
		created := run(pt.Fresh(s), 1)
		require.NotEmpty(t, fresh.History.End)
		assert.Empty(t, explore.Inconsistent(pt, fresh, created, masks), pt.Signature())
		assert.Empty(t, explore.Inconsistent(pt, created, fresh, masks), pt.Signature())
		assert.Empty(t, plan.Recovered(pt, recovered), pt.Signature())
		assert.Empty(t, explore.Inconsistent(pt, round, created, masks), pt.Signature())
		assert.Less(t, len(fresh.History.Requests), len(recovered.History.Requests), pt.Signature())
		assert.Less(t, len(recovered.History.Requests), len(round.History.Requests), pt.Signature())
		o, ok := plan.RoundTripOutcome(pt, round, "round.json")
		require.True(t, ok)
		assert.Empty(t, o.Differences, pt.Signature())

		// The instants it is read at: its writes back, its first change.
		var writes []time.Time
		for _, e := range round.History.Log {
			if strings.Contains(e.What, "json patch") && !slices.Contains(writes, e.At) {
				writes = append(writes, e.At)
			}
		}
		require.Len(t, writes, 1+len(pt.Writes), "%s: %v", pt.Signature(), round.History.Log)
		wroteAt := func(at time.Time) *reports.Result {
			r := *round
			r.History.Requests = append(slices.Clone(round.History.Requests), reports.Request{At: at, Verb: "update", Resource: "configmaps", Name: "copy-a", Code: 200})
			slices.SortStableFunc(r.History.Requests, func(a, b reports.Request) int { return a.At.Compare(b.At) })
			return &r
		}
		for _, at := range writes[:2] {
			_, _, ok = plan.RoundTripOf(pt, wroteAt(at.Add(-time.Millisecond)))
			assert.False(t, ok, "%s: a write just before %v", pt.Signature(), at)
			_, _, ok = plan.RoundTripOf(pt, wroteAt(at.Add(-time.Duration(s.Timing.Settle)-time.Millisecond)))
			assert.True(t, ok, "%s: a write before the settle window before %v", pt.Signature(), at)
		}
		last := writes[len(writes)-1]
		missed := *round
		missed.History.Log = slices.DeleteFunc(slices.Clone(round.History.Log), func(e reports.Entry) bool {
			return strings.Contains(e.What, "json patch") && e.At.Equal(last)
		})
		_, _, ok = plan.RoundTripOf(pt, &missed)
		assert.False(t, ok, "%s: its last change not made", pt.Signature())
	}
}

// inputPlan loads the scenario in file, plans its input points from two
// reference runs of c on fake, and returns a run of c on fake, with the
// end state kept, that fails the test on a harness error.
func inputPlan(t *testing.T, file string, c scenarios.Controller) (*scenarios.Scenario, *explore.Plan, func(*scenarios.Scenario, uint64) *reports.Result) {
	t.Helper()
	s, err := scenarios.Load(file)
	require.NoError(t, err)
	run := func(s *scenarios.Scenario, seed uint64) *reports.Result {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: c, EndState: true})
		require.Empty(t, res.Error)
		return res
	}
	plan, err := explore.NewPlan(s, "fake", 1, []*reports.Result{run(s, 1), run(s, 2)}, explore.Masks{})
	require.NoError(t, err)
	require.NoError(t, plan.PlanInputs(explore.InputRules{}))
	return s, plan, run
}
