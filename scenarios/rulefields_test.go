package scenarios_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
)

// ruleHead opens a scenario with a Widget CRD of its own.
const ruleHead = `name: typed
catches: typos in rules
objects:
  - manifest:
      apiVersion: apiextensions.k8s.io/v1
      kind: CustomResourceDefinition
      metadata: {name: widgets.example.converge.dev}
      spec:
        group: example.converge.dev
        scope: Namespaced
        names: {plural: widgets, kind: Widget}
        versions:
          - name: v1
            served: true
            storage: true
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec: {type: object, properties: {replicas: {type: integer}}}
                  status: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - manifest: {apiVersion: example.converge.dev/v1, kind: Widget, metadata: {name: w}, spec: {replicas: 1}}
`

// A field a rule reads that its kind cannot hold is refused where it is
// written, in every way YAML writes a string.
func TestParseRefusesAFieldTheKindCannotHold(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string
	}{{
		name: "plain",
		doc: ruleHead + `invariants:
  - name: replicas-bounded
    select: {apiVersion: apps/v1, kind: Deployment}
    rule: object.spec.replicas <= 10 && object.spec.replica >= 0
`,
		want: []string{`s.yaml:26:53: invariant "replicas-bounded": rule reads object.spec.replica, which Deployment (apps/v1) has no field "replica" (did you mean "replicas"?)`},
	}, {
		name: "folded",
		doc: ruleHead + `invariants:
  - name: replicas-bounded
    select: {apiVersion: apps/v1, kind: Deployment}
    rule: >
      has(object.spec.replicas) &&
        has(object.spec.replica)
`,
		want: []string{`s.yaml:28:25: invariant "replicas-bounded": rule reads object.spec.replica,`},
	}, {
		name: "literal and quoted",
		doc: ruleHead + `invariants:
  - name: a
    select: {apiVersion: example.converge.dev/v1, kind: Widget}
    rule: |
      object.status.anything == 1 ||
      object.spec.replica == 1
  - name: b
    select: {apiVersion: example.converge.dev/v1, kind: Widget}
    rule: "object.metadata.lables['x'] == \"y\""
goal:
  objects:
    - select: {apiVersion: apps/v1, kind: Deployment, name: w}
      condition: 'object.status.readyReplica == 2'
`,
		want: []string{
			`s.yaml:28:19: invariant "a": rule reads object.spec.replica, which Widget (example.converge.dev/v1) has no field "replica" (did you mean "replicas"?)`,
			`s.yaml:31:28: invariant "b": rule reads object.metadata.lables, which Widget (example.converge.dev/v1) has no field "lables" (did you mean "labels"?)`,
			`s.yaml:35:33: goal.objects[0]: condition reads object.status.readyReplica, which Deployment (apps/v1) has no field "readyReplica" (did you mean "readyReplicas"?)`,
		},
	}, {
		name: "across",
		doc: ruleHead + `invariants:
  - name: owned
    select: {apiVersion: example.converge.dev/v1, kind: Widget}
    rule: objects.Deployment.all(d, d.spec.replicas == object.spec.replicas && has(d.metadata.ownerReference))
writes:
  - select: {apiVersion: apps/v1, kind: Deployment}
`,
		want: []string{`s.yaml:26:95: invariant "owned": rule reads d.metadata.ownerReference, which Deployment (apps/v1) has no field "ownerReference" (did you mean "ownerReferences"?)`},
	}, {
		name: "json",
		doc:  `{"name": "typed", "catches": "typos", "invariants": [{"name": "j", "select": {"apiVersion": "apps/v1", "kind": "Deployment"}, "rule": "object.metadata.name != \"\\\"\" &&\n\tobject.spec.replica > 0"}]}`,
		want: []string{`s.yaml:1:187: invariant "j": rule reads object.spec.replica,`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			_, err := scenarios.Parse("s.yaml", []byte(c.doc))
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(c.want), "one error each: %v", err)
			// The place given is the field's name.
			for _, line := range strings.Split(err.Error(), "\n") {
				assert.Equal(t, fieldNamed(t, line), wordAt(t, c.doc, line), line)
			}
		})
	}
}

// fieldNamed returns the field an error says no kind holds.
func fieldNamed(t *testing.T, msg string) string {
	t.Helper()
	_, after, ok := strings.Cut(msg, `has no field "`)
	require.True(t, ok, msg)
	name, _, _ := strings.Cut(after, `"`)
	return name
}

// wordAt returns the word at the file:line:col an error starts with.
func wordAt(t *testing.T, doc, msg string) string {
	t.Helper()
	var line, col int
	parts := strings.SplitN(msg, ":", 4)
	require.Len(t, parts, 4, msg)
	line, col = atoi(t, parts[1]), atoi(t, parts[2])
	lines := strings.Split(doc, "\n")
	require.Less(t, line-1, len(lines), msg)
	rest := []rune(lines[line-1])[col-1:]
	end := 0
	for end < len(rest) && (rest[end] == '_' || rest[end] >= 'a' && rest[end] <= 'z' || rest[end] >= 'A' && rest[end] <= 'Z') {
		end++
	}
	return string(rest[:end])
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		require.True(t, r >= '0' && r <= '9', s)
		n = n*10 + int(r-'0')
	}
	return n
}

// What could be there is accepted: keys of maps, kinds without a schema,
// fields below preserved unknown fields, objects.Kind of a kind the
// scenario names in two groups (objects are keyed by kind alone).
func TestParseAcceptsWhatCouldBeThere(t *testing.T) {
	doc := ruleHead + `invariants:
  - name: any-key
    select: {apiVersion: v1, kind: ConfigMap}
    rule: object.data.mising == 'x' || object.metadata.labels.app == 'a'
  - name: preserved
    select: {apiVersion: example.converge.dev/v1, kind: Widget}
    rule: object.status.whatever.below == 1
  - name: unknown-kind
    select: {apiVersion: example.converge.dev/v1, kind: Gadget}
    rule: object.spec.anything == 1
  - name: unknown-version
    select: {apiVersion: example.converge.dev/v2, kind: Widget}
    rule: object.spec.replica == 1
  - name: widget-of-two-groups
    select: {apiVersion: example.converge.dev/v1, kind: Widget}
    rule: objects.Widget.all(w, w.spec.replica == 1)
writes:
  - select: {apiVersion: other.converge.dev/v1, kind: Widget}
goal:
  objects:
    - select: {apiVersion: example.converge.dev/v1, kind: Widget, name: w}
      condition: object.spec.replicas == 1 && objects.Gadget.all(g, g.x.y == 1)
`
	_, err := scenarios.Parse("s.yaml", []byte(doc))
	require.NoError(t, err)
}

// A goal's partial object and an interfering actor's field are checked
// too: the one could never match, the other would be dropped by the API
// server, silently.
func TestParseRefusesAFieldTheKindCannotHoldInMatchAndSet(t *testing.T) {
	doc := ruleHead + `world:
  interference:
    - every: 1s
      select: {apiVersion: apps/v1, kind: Deployment}
      set: {path: spec.replica, value: 3}
    - every: 1s
      select: {apiVersion: example.converge.dev/v1, kind: Widget}
      set: {path: spec, value: {replicas: 2, paused: true}}
    - every: 1s
      select: {apiVersion: v1, kind: ConfigMap}
      set: {path: data.anything, value: x}
goal:
  objects:
    - select: {apiVersion: apps/v1, kind: Deployment, name: w}
      match:
        status:
          readyReplica: 2
`
	_, err := scenarios.Parse("s.yaml", []byte(doc))
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`s.yaml:27: world.interference[0].set: Deployment (apps/v1) has no field spec.replica (did you mean "replicas"?)`,
		`s.yaml:30: world.interference[1].set: Widget (example.converge.dev/v1) has no field spec.paused`,
		`s.yaml:39: goal.objects[0].match.status.readyReplica: Deployment (apps/v1) has no field status.readyReplica (did you mean "readyReplicas"?)`,
	}, "\n"), err.Error())
}

// A scenario built in Go has no file: the place is in the rule.
func TestValidateNamesThePlaceInTheRule(t *testing.T) {
	s := scenarios.Scenario{Name: "typed", Catches: "typos", Invariants: []scenarios.Invariant{{
		Name: "x", Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}, Rule: "object.spec.paused ||\n object.spec.replica > 0",
	}}}
	assert.EqualError(t, s.Validate(), `invariants[0].rule: line 2, column 14: invariant "x": rule reads object.spec.replica, which Deployment (apps/v1) has no field "replica" (did you mean "replicas"?)`)
}

// A write rule's field is a path its kind must hold: a typo would make
// the rule refuse every write it was meant for. A field ending in a
// prefix is checked up to its parent.
func TestParseRefusesAWriteRuleFieldTheKindCannotHold(t *testing.T) {
	doc := ruleHead + `writes:
  - select: {apiVersion: apps/v1, kind: Deployment}
    fields: [spec.replica, spec.repl*, 'metadata.annotations["converge.dev/*"]', status.*, "*", metadata.lables]
  - select: {apiVersion: v1, kind: ConfigMap}
    fields: [data.anything, date]
`
	_, err := scenarios.Parse("s.yaml", []byte(doc))
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`s.yaml:25: writes[0].fields[0]: Deployment (apps/v1) has no field spec.replica (did you mean "replicas"?)`,
		`s.yaml:25: writes[0].fields[5]: Deployment (apps/v1) has no field metadata.lables (did you mean "labels"?)`,
		`s.yaml:27: writes[1].fields[1]: ConfigMap (v1) has no field date (did you mean "data"?)`,
	}, "\n"), err.Error())
}
