package explore_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/explore/internal/copier"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

var noiseSeeds = flag.Int("explore.noise-seeds", 1, "explorations of the noisy copier, with different seeds")

func copierScenario(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Load("testdata/copier.yaml")
	require.NoError(t, err)
	return s
}

// summary is one line per exploration and per finding, for the log.
func summary(e *explore.Exploration) string {
	lines := []string{fmt.Sprintf("%s seed %d: %d references, %d points, %d run, %d findings in %v; noise: %d fields, %d objects, %d families, %d counts",
		e.Controller, e.Seed, len(e.References), e.Coverage.Points, e.Coverage.Run, len(e.Findings), time.Duration(e.Wall).Round(time.Millisecond),
		len(e.Noise.Fields), len(e.Noise.Exists), len(e.Noise.Families), len(e.Noise.Counts))}
	for _, f := range e.Findings {
		lines = append(lines, fmt.Sprintf("  %s (%d points; smallest %s %s): %s", f.Name(), len(f.Points), f.Smallest.Point.ID, f.Smallest.Point.Signature, f.Detail))
	}
	return strings.Join(lines, "\n")
}

// A controller that draws its delays, its choice between update and
// replace, and a name from the global math/rand is correct: none of it is
// a finding. Its references disagree, so more of them run.
func TestExploreNoisyControllerFindsNothing(t *testing.T) {
	s := copierScenario(t)
	for seed := uint64(1); seed <= uint64(*noiseSeeds); seed++ {
		e := scenariotest.Explore(t, s, copier.Controller{Flavour: copier.Noisy}, scenariotest.ExploreOptions{Seed: seed * 10})
		require.NotNil(t, e)
		t.Log(summary(e))
		assert.Greater(t, len(e.References), explore.DefaultReferences, "the references disagree: more of them run")
		assert.LessOrEqual(t, len(e.References), explore.MaxReferencesFactor*explore.DefaultReferences)
		assert.NotEmpty(t, e.Noise.Counts, "the copier replaces copies at random")
		assert.NotEmpty(t, e.Noise.Families, "the copier names its note at random")
		assert.Positive(t, e.Coverage.Run)
		assert.Empty(t, e.Findings, "false alarm on the noisy copier:\n%s", e.Text())
		_, err := explore.WriteReport(t.TempDir(), e)
		require.NoError(t, err, "the report names what was not judged")
	}
}

// The correct copier has no finding; the one that forgets a source after a
// 409 converges only at the informers' resync, well inside the deadline:
// the liveness oracle finds it, on a conflict.
func TestExploreFindsWorkDroppedAfterAConflict(t *testing.T) {
	s := copierScenario(t)
	e := scenariotest.Explore(t, s, copier.Controller{Flavour: copier.Correct}, scenariotest.ExploreOptions{Seed: 1})
	require.NotNil(t, e)
	t.Log(summary(e))
	assert.Empty(t, e.Findings, "false alarm on the correct copier:\n%s", e.Text())
	assert.Len(t, e.References, explore.DefaultReferences, "the references of a deterministic controller agree")

	e = scenariotest.Explore(t, s, copier.Controller{Flavour: copier.DropsConflicts}, scenariotest.ExploreOptions{Seed: 1})
	require.NotNil(t, e)
	t.Log(summary(e))
	require.NotEmpty(t, e.Findings, "the dropped key was not found")
	// Two oracles tell a key healed by the resync: the verdict's
	// retries-failed-writes (no retry counted after the injected 409) and
	// liveness (converged long after every reference, idle meanwhile).
	assert.Len(t, e.Findings, 2, e.Text())
	assert.True(t, slices.ContainsFunc(e.Findings, func(f explore.Finding) bool {
		return f.Oracle == explore.OracleVerdict && f.Field == check.RetriesFailedWrites
	}), e.Text())
	i := slices.IndexFunc(e.Findings, func(f explore.Finding) bool { return f.Oracle == explore.OracleLiveness })
	require.GreaterOrEqual(t, i, 0, e.Text())
	f := e.Findings[i]
	assert.Equal(t, explore.Refused, f.Smallest.Point.Class)
	assert.Contains(t, f.Smallest.Point.Signature, "conflict")
	j := slices.IndexFunc(f.Smallest.Differences, func(d explore.Difference) bool { return d.Lateness != nil })
	require.GreaterOrEqual(t, j, 0, "the smallest point's lateness")
	d := f.Smallest.Differences[j]
	assert.Greater(t, time.Duration(d.Lateness.Converged), time.Duration(d.Lateness.Allowed))
	assert.GreaterOrEqual(t, time.Duration(d.Lateness.Converged), copier.Resync, "healed by the resync, not before")
}

// Masking noise leaves a deterministic controller's bug found by what
// the references agree on: the webapp operator that takes a 409 on its
// ConfigMap for success ends with another config than every reference.
func TestExploreStillFindsADeterministicBug(t *testing.T) {
	tier.Full(t, "an exploration of the webapp example (about 8 s)")
	all, err := scenarios.LoadDir("../../examples/webapp/scenarios")
	require.NoError(t, err)
	i := slices.IndexFunc(all, func(s *scenarios.Scenario) bool { return s.Name == "webapp" })
	require.GreaterOrEqual(t, i, 0)
	c, err := webapp.UnderTest("ignore-conflict")
	require.NoError(t, err)
	// Every point: the verdict's retries-failed-writes finds the same bug
	// first, on a 409 the mutant takes for success.
	e := scenariotest.Explore(t, explore.WithoutFaults(all[i]), c, scenariotest.ExploreOptions{Seed: 100})
	require.NotNil(t, e)
	t.Log(summary(e))
	assert.True(t, slices.ContainsFunc(e.Findings, func(f explore.Finding) bool { return f.Oracle == explore.OracleEndState }),
		"the end state differs from the references':\n%s", e.Text())
}
