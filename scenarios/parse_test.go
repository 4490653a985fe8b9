package scenarios_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

func TestParseNamesFileLineAndField(t *testing.T) {
	for doc, want := range map[string][]string{
		"name: a\ncatches: x\nworld:\n  nodez: 3\n":                                                                             {"s.yaml:4: world.nodez: unknown field"},
		"name: a\ncatches: x\ntiming: {deadline: soon}\n":                                                                       {`s.yaml:3: timing.deadline: "soon" is not a duration`},
		"name: a\ncatches: x\nworld: {nodes: many}\n":                                                                           {`s.yaml:3: world.nodes: expected a whole number (64 bits), got "many"`},
		"name: a\ncatches: x\nfaults:\n  - {fault: meteor}\n":                                                                   {`s.yaml:4: faults[0]: unknown fault "meteor"`},
		"name: a\ncatches: x\nfaults:\n  - {fault: latency, delay: 2 s}\n":                                                      {`s.yaml:4: faults[0].delay: "2 s" is not a duration`},
		"name: A b\nobjects:\n  - count: 2\n    manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n":             {"s.yaml:1: name:", `s.yaml:4: objects[0].manifest: metadata.name "a": 2 copies need {{index}} in their name`, "s.yaml:1: catches: say which broken behaviour"},
		"name: a\ncatches: x\nworld: {readiness: {kind: sometimes}}\n":                                                          {`s.yaml:3: world.readiness: readiness model: unknown readiness model "sometimes"`},
		"name: a\ncatches: x\ninvariants:\n  - name: small\n    select: {apiVersion: v1, kind: Pod}\n    rule: object.spec.(\n": {"s.yaml:6: invariants[0].rule: column"},
		"name: a\ncatches: x\ninvariants:\n  - name: small\n    select: {apiVersion: v1, kind: Pod}\n    rule: 'object.x && oldObject.y'\n  - name: small\n    select: {apiVersion: v1, kind: Pod, labels: 'a b c'}\n    rule: \"'text'\"\n": {"s.yaml:7: invariants[1].name: \"small\" is given twice", "s.yaml:8: invariants[1].select: labels:", "s.yaml:9: invariants[1].rule:"},
		"name: a\ncatches: x\ngoal:\n  objects:\n    - select: {apiVersion: v1, kind: Pod}\n      condition: 'size(object.spec.containers) > \"a\"'\n":                                                                                       {"s.yaml:6: goal.objects[0].condition:"},
		"name: a\ncatches: x\nwrites:\n  - select: {apiVersion: v1, kind: Pod}\n    verbs: [paint]\n    fields: ['spec.[']\n":                                                                                                                {`s.yaml:5: writes[0].verbs[0]: unknown verb "paint"`, "s.yaml:6: writes[0].fields[0]:"},
		"name: a\ncatches: x\ninvariants:\n  - name: both\n    select: {apiVersion: v1, kind: Pod}\n    rule: 'oldObject.x == objects.Pod[0].x'\n  - name: unwatched\n    select: {apiVersion: v1, kind: Pod}\n    rule: 'objects.Node.all(n, true) && objects[\"Secret\"].size() == 0'\n": {
			"s.yaml:6: invariants[0].rule: a rule reads oldObject (a change of one object) or objects (several at one instant), not both",
			"s.yaml:9: invariants[1].rule: objects.Node: the scenario names no kind Node", "s.yaml:9: invariants[1].rule: objects.Secret: the scenario names no kind Secret"},
		"name: a\ncatches: x\nallow: [nothing-bad]\n":                 {`s.yaml:3: allow[0]: "nothing-bad" is not a built-in invariant`},
		"name: a\ncatches: x\ntiming: {deadline: 10s, settle: 20s}\n": {"s.yaml:3: timing.settle: the settle window (20s) must be shorter than the deadline (10s)"},
		"name: a\ncatches: x\nbackends: [fake, minikube]\n":           {`s.yaml:3: backends[1]: unknown backend "minikube"`},
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
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all), 12)
	onFake := 0
	for _, s := range all {
		assert.NotEmpty(t, s.Catches, "%s names the broken behaviour it catches", s.Name)
		if s.RunsOn(fake.Name) {
			onFake++
		}
	}
	assert.GreaterOrEqual(t, onFake, 12)
	_, err = scaler.Lookup("no-such-scenario")
	assert.ErrorContains(t, err, `no scenario named "no-such-scenario"`)
}

// A scenario that does not run on a backend, or is invalid, is a result
// with Error set, never a panic.
func TestBadRunsAreResults(t *testing.T) {
	s, err := scaler.Lookup("throttle-storm")
	require.NoError(t, err)
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: fake.Kind{}, Controller: scaler.Controller{}})
	assert.False(t, res.Pass)
	assert.Contains(t, res.Error, "does not run on fake")
	res = scenarios.Run(context.Background(), &scenarios.Scenario{Name: "x"}, scenarios.Options{Backend: fake.Kind{}})
	assert.Contains(t, res.Error, "invalid scenario")
	assert.Equal(t, reports.SchemaVersion, res.Schema)
	_ = time.Second
}
