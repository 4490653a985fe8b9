package zoo_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/zoo"
)

// A successor started against a view from before its predecessor's last
// two writes decides again what was decided then. The mutant that patches
// without a resourceVersion sets web-0 back to 8 over its own 16
// (no-stale-write), on every seed; the correct scaler's patch from that
// view carries the resourceVersion it read and is refused, so it never
// regresses web-0. The end state does not tell them apart: both end at 16.
func TestAStaleSuccessorRegressingItsOwnWriteIsFound(t *testing.T) {
	s, err := scenarios.Load("testdata/restart-far-into-the-past.yaml")
	require.NoError(t, err)
	mutants := zoo.Mutants()
	m := slices.IndexFunc(mutants, func(m zoo.Mutant) bool { return m.Name == "no-precondition" })
	require.GreaterOrEqual(t, m, 0)
	stale := func(res *reports.Result) []reports.Finding {
		var out []reports.Finding
		for _, f := range res.Findings {
			if f.Check == scenarios.InvNoStaleWrite {
				out = append(out, f)
			}
		}
		return out
	}
	for seed := uint64(1); seed <= 5; seed++ {
		res := scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: mutants[m].Controller()})
		found := stale(res)
		if assert.NotEmpty(t, found, "seed %d: the mutant's regression of web-0 is not found", seed) {
			assert.True(t, strings.Contains(found[0].Detail, "it set spec.replicas back to 8") && strings.Contains(found[0].Detail, "over 16"),
				"seed %d: %s", seed, found[0].Detail)
		}
		assert.Empty(t, stale(scenariotest.RunFake(t, s, scenarios.Options{Seed: seed, Controller: zoo.Control().Controller()})),
			"seed %d: the correct scaler", seed)
	}
}
