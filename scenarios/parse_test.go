package scenarios_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

func TestParseNamesFileLineAndField(t *testing.T) {
	for doc, want := range map[string][]string{
		"name: a\ncatches: x\nworkload:\n  replcas: 3\n":                   {"s.yaml:4: workload.replcas: unknown field"},
		"name: a\ncatches: x\ntiming: {deadline: soon}\n":                  {`s.yaml:3: timing.deadline: "soon" is not a duration`},
		"name: a\ncatches: x\nworkload: {replicas: many}\n":                {`s.yaml:3: workload.replicas: expected a whole number (32 bits), got "many"`},
		"name: a\ncatches: x\nfaults:\n  - {fault: meteor}\n":              {`s.yaml:4: faults[0]: unknown fault "meteor"`},
		"name: a\ncatches: x\nfaults:\n  - {fault: latency, delay: 2 s}\n": {`s.yaml:4: faults[0].delay: "2 s" is not a duration`},
		"name: A b\nworkload: {replicas: 4, maxReplicas: 2}\n":             {"s.yaml:1: name:", "s.yaml:2: workload.maxReplicas: 2 is below replicas 4", "s.yaml:1: catches: say which broken behaviour"},
		"name: a\ncatches: x\nreadiness: {kind: sometimes}\n":              {`s.yaml:3: readiness: readiness model: unknown readiness model "sometimes"`},
		"name: a\ncatches: x\ntiming: {deadline: 10s, settle: 20s}\n":      {"s.yaml:3: timing.settle: the settle window (20s) must be shorter than the deadline (10s)"},
		"name: a\ncatches: x\nbackends: [fake, minikube]\n":                {`s.yaml:3: backends[1]: unknown backend "minikube"`},
		"- just\n- a list\n":      {"s.yaml:1: : expected a mapping of fields"},
		"name: a\n  catches: [\n": {"s.yaml: yaml: line"},
	} {
		_, err := scenarios.Parse("s.yaml", []byte(doc))
		require.Error(t, err, doc)
		for _, w := range want {
			assert.Contains(t, err.Error(), w, doc)
		}
	}
	_, err := scenarios.Parse("s.yaml", nil)
	assert.ErrorContains(t, err, "s.yaml: empty scenario")
}

func TestCatalogueIsComplete(t *testing.T) {
	all, err := scenarios.Catalogue()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all), 12)
	onFake := 0
	for _, s := range all {
		assert.NotEmpty(t, s.Catches, "%s names the broken behaviour it catches", s.Name)
		if s.RunsOn(scenarios.Fake) {
			onFake++
		}
	}
	assert.GreaterOrEqual(t, onFake, 12)
	_, err = scenarios.Lookup("no-such-scenario")
	assert.ErrorContains(t, err, `no scenario named "no-such-scenario"`)
}

// A scenario that does not run on a backend, or is invalid, is a result
// with Error set, never a panic.
func TestBadRunsAreResults(t *testing.T) {
	s, err := scenarios.Lookup("throttle-storm")
	require.NoError(t, err)
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: scenarios.Fake})
	assert.False(t, res.Pass)
	assert.Contains(t, res.Error, "does not run on fake")
	res = scenarios.Run(context.Background(), &scenarios.Scenario{Name: "x"}, scenarios.Options{Backend: scenarios.Fake})
	assert.Contains(t, res.Error, "invalid scenario")
	assert.Equal(t, reports.SchemaVersion, res.Schema)
	_ = time.Second
}
