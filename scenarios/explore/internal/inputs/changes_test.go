package inputs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

const poolSchema = `
type: object
required: [replicas, mode]
properties:
  replicas: {type: integer, minimum: 0, maximum: 10}
  mode: {type: string, enum: [fast, safe, "off"]}
  paused: {type: boolean}
  note: {type: string}
  targets:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items:
      type: object
      required: [name]
      properties:
        name: {type: string}
        port: {type: integer, minimum: 1, maximum: 65535}
  config:
    type: object
    additionalProperties: {type: string}
`

func pool() map[string]any {
	return object(map[string]any{
		"replicas": int64(3),
		"mode":     "fast",
		"paused":   false,
		"note":     "hi",
		"targets": []any{
			map[string]any{"name": "a", "port": int64(80)},
			map[string]any{"name": "b", "port": int64(81)},
		},
		"config": map[string]any{"k1": "v1", "k2": "v2"},
	})
}

// A replica count is scaled to its bounds and by one each way, never past
// them but as a refused change.
func TestChangesScaleAReplicaCountWithinItsBounds(t *testing.T) {
	s := schemaOf(t, `
type: object
required: [replicas]
properties:
  replicas: {type: integer, minimum: 0, maximum: 10}
`)
	cs := changes(t, s, object(map[string]any{"replicas": int64(3)}), Rules{})
	assert.Equal(t, []Change{
		{Path: "spec.replicas", Op: OpSet, Value: int64(0), Why: "its minimum"},
		{Path: "spec.replicas", Op: OpSet, Value: int64(10), Why: "its maximum"},
		{Path: "spec.replicas", Op: OpSet, Value: int64(4), Why: "one more"},
		{Path: "spec.replicas", Op: OpSet, Value: int64(2), Why: "one less"},
		{Path: "spec.replicas", Op: OpSet, Value: int64(11), Why: "above its maximum", Invalid: true},
		{Path: "spec.replicas", Op: OpSet, Value: int64(-1), Why: "below its minimum", Invalid: true},
		{Path: "spec.replicas", Op: OpRemove, Why: "removed (required)", Invalid: true},
	}, cs)
}

// What each kind of scalar is changed to: the values set at spec.x that
// the schema allows, and those it refuses.
func TestChangesOfAScalar(t *testing.T) {
	for _, tc := range []struct {
		name        string
		schema      string
		value       any
		valid, refs []any
	}{
		{"an integer at its maximum", `{type: integer, minimum: 0, maximum: 10}`, int64(10),
			[]any{int64(0), int64(9)}, []any{int64(11), int64(-1)}},
		{"an integer with no bounds is not sent far", `{type: integer}`, int64(3),
			[]any{int64(0), int64(4), int64(2), int64(7)}, nil},
		{"exclusive bounds", `{type: integer, minimum: 0, exclusiveMinimum: true, maximum: 5, exclusiveMaximum: true}`, int64(2),
			[]any{int64(1), int64(4), int64(3)}, []any{int64(5), int64(0)}},
		{"multipleOf is an integer's step", `{type: integer, minimum: 3, maximum: 22, multipleOf: 5}`, int64(10),
			[]any{int64(5), int64(20), int64(15)}, []any{int64(23), int64(2)}},
		{"a number", `{type: number, minimum: 0, exclusiveMinimum: true, maximum: 1.5}`, 0.5,
			[]any{1.5}, []any{2.5, int64(0)}},
		{"a string enum", `{type: string, enum: [fast, safe, "off"]}`, "fast",
			[]any{"safe", "off"}, []any{"fast-x"}},
		{"an integer enum", `{type: integer, enum: [1, 2, 4]}`, int64(2),
			[]any{int64(1), int64(4)}, []any{int64(5)}},
		{"a boolean", `{type: boolean}`, false, []any{true}, nil},
		{"a string", `{type: string}`, "hi", []any{"hi-x", ""}, nil},
		{"a pattern is kept", `{type: string, pattern: '^[a-z]+:[0-9]+$', maxLength: 6}`, "web:1",
			[]any{"web:10"}, []any{"xxxxxxx", "web:1!"}},
		{"a minimum length", `{type: string, minLength: 2}`, "ab", []any{"ab-x"}, []any{"x"}},
		{"a format is left alone", `{type: string, format: date-time}`, "2020-01-01T00:00:00Z", nil, nil},
		{"an int-or-string holding a number", `{x-kubernetes-int-or-string: true}`, int64(1),
			[]any{int64(0), int64(2), int64(3)}, nil},
		{"an int-or-string holding a string", `{x-kubernetes-int-or-string: true}`, "25%", []any{"25%-x", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schemaOf(t, "{type: object, properties: {x: "+tc.schema+"}}")
			cs := at(changes(t, s, object(map[string]any{"x": tc.value}), Rules{}), "spec.x")
			assert.Equal(t, tc.valid, sets(valid(cs)), "allowed")
			assert.Equal(t, tc.refs, sets(invalid(cs)), "refused")
			assert.Contains(t, ops(valid(cs)), "spec.x remove", "the optional field is removed")
		})
	}
}

func TestChangesRemoveOptionalFieldsOnly(t *testing.T) {
	s := schemaOf(t, `
type: object
required: [name]
properties:
  name: {type: string}
  note: {type: string}
`)
	cs := changes(t, s, object(map[string]any{"name": "a", "note": "b"}), Rules{})
	assert.Contains(t, valid(cs), Change{Path: "spec.note", Op: OpRemove, Why: "removed (optional)"})
	assert.Contains(t, invalid(cs), Change{Path: "spec.name", Op: OpRemove, Why: "removed (required)", Invalid: true})
	assert.NotContains(t, ops(valid(cs)), "spec.name remove")
}

// A field the object lacks is added with its default, or the least value
// its schema allows; one with no such value is not.
func TestChangesAddAbsentFields(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  timeout: {type: integer, default: 30}
  tier: {type: string, enum: [gold, silver]}
  retries: {type: integer, minimum: 1}
  limits:
    type: object
    required: [cpu]
    properties:
      cpu: {type: integer, minimum: 1}
      memory: {type: string}
  when: {type: string, format: date-time}
  stamp:
    type: object
    required: [at]
    properties:
      at: {type: string, format: date-time}
  labels: {type: object, additionalProperties: {type: string}}
  ports: {type: array, items: {type: integer}}
`)
	cs := changes(t, s, object(map[string]any{}), Rules{})
	assert.Equal(t, []Change{
		{Path: "spec.labels", Op: OpSet, Value: map[string]any{}, Why: "added (minimal)"},
		{Path: "spec.limits", Op: OpSet, Value: map[string]any{"cpu": int64(1)}, Why: "added (minimal)"},
		{Path: "spec.ports", Op: OpSet, Value: []any{}, Why: "added (minimal)"},
		{Path: "spec.retries", Op: OpSet, Value: int64(1), Why: "added (minimal)"},
		{Path: "spec.tier", Op: OpSet, Value: "gold", Why: "added (minimal)"},
		{Path: "spec.timeout", Op: OpSet, Value: int64(30), Why: "added (its default)"},
	}, cs)
}

// In a list-type=map the added item is the last one with a new key.
func TestChangesOfAListMap(t *testing.T) {
	s := schemaOf(t, poolSchema)
	obj := pool()
	cs := changes(t, s, obj, Rules{})
	assert.Equal(t, []Change{
		{Path: "spec.targets[2]", Op: OpAddItem, Value: map[string]any{"name": "b-x", "port": int64(81)}, Why: "an item added"},
		{Path: "spec.targets[1]", Op: OpRemoveItem, Why: "the last item removed"},
		{Path: "spec.targets[0]", Op: OpRemoveItem, Why: "the first item removed"},
		{Path: "spec.targets", Op: OpReorder, Why: "reversed"},
	}, listOps(cs, "spec.targets"))
	assert.Contains(t, sets(at(cs, "spec.targets[0].port")), int64(65535), "items are changed too")

	next, err := Apply(obj, at(cs, "spec.targets[2]")[0])
	require.NoError(t, err)
	v, err := NewValidator(s)
	require.NoError(t, err)
	assert.NoError(t, v.Validate(next, obj))

	t.Run("a key taken by an earlier item is not reused", func(t *testing.T) {
		obj := object(map[string]any{"mode": "fast", "replicas": int64(1), "targets": []any{
			map[string]any{"name": "a-x"}, map[string]any{"name": "a"},
		}})
		add := at(changes(t, s, obj, Rules{}), "spec.targets[2]")
		require.Len(t, add, 1)
		assert.Equal(t, map[string]any{"name": "ax"}, add[0].Value)
	})
}

// listOps is the changes that add, remove or reorder the items of the list
// at path.
func listOps(cs []Change, path string) []Change {
	var out []Change
	for _, c := range cs {
		if (c.Op == OpAddItem || c.Op == OpRemoveItem || c.Op == OpReorder) && strings.HasPrefix(c.Path, path) {
			out = append(out, c)
		}
	}
	return out
}

func TestChangesOfLists(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		value  []any
		want   []Change
	}{
		{"a set gets a value of its own", `{type: array, x-kubernetes-list-type: set, items: {type: integer}}`, []any{int64(3), int64(2)},
			[]Change{
				{Path: "spec.x[2]", Op: OpAddItem, Value: int64(4), Why: "an item added"},
				{Path: "spec.x[1]", Op: OpRemoveItem, Why: "the last item removed"},
				{Path: "spec.x[0]", Op: OpRemoveItem, Why: "the first item removed"},
				{Path: "spec.x", Op: OpReorder, Why: "reversed"},
			}},
		{"a list of equal items is not reordered", `{type: array, items: {type: string}}`, []any{"a", "a"},
			[]Change{
				{Path: "spec.x[2]", Op: OpAddItem, Value: "a", Why: "an item added"},
				{Path: "spec.x[1]", Op: OpRemoveItem, Why: "the last item removed"},
				{Path: "spec.x[0]", Op: OpRemoveItem, Why: "the first item removed"},
			}},
		{"an empty list gets a minimal item", `{type: array, items: {type: object, required: [size], properties: {size: {type: integer, minimum: 2}}}}`, []any{},
			[]Change{{Path: "spec.x[0]", Op: OpAddItem, Value: map[string]any{"size": int64(2)}, Why: "an item added"}}},
		{"a list at its bounds is not grown or shrunk", `{type: array, minItems: 2, maxItems: 2, items: {type: string}}`, []any{"a", "b"},
			[]Change{
				{Path: "spec.x", Op: OpReorder, Why: "reversed"},
				{Path: "spec.x[2]", Op: OpAddItem, Value: "b", Why: "an item added", Invalid: true},
				{Path: "spec.x[1]", Op: OpRemoveItem, Why: "the last item removed", Invalid: true},
				{Path: "spec.x[0]", Op: OpRemoveItem, Why: "the first item removed", Invalid: true},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schemaOf(t, "{type: object, required: [x], properties: {x: "+tc.schema+"}}")
			cs := changes(t, s, object(map[string]any{"x": tc.value}), Rules{})
			assert.Equal(t, tc.want, listOps(cs, "spec.x"))
		})
	}
}

func TestChangesOfAMap(t *testing.T) {
	s := schemaOf(t, `{type: object, properties: {config: {type: object, additionalProperties: {type: string}}}}`)
	cs := changes(t, s, object(map[string]any{"config": map[string]any{"k1": "v1", "k2": "v2"}}), Rules{})
	assert.Equal(t, []string{
		`spec.config["converge-added"] add-key "v1" (a key added)`,
		`spec.config remove (removed (optional))`,
		`spec.config["k1"] set "v1-x" (another value)`,
		`spec.config["k1"] set "" (empty)`,
		`spec.config["k1"] remove-key (a key removed)`,
		`spec.config["k2"] set "v2-x" (another value)`,
		`spec.config["k2"] set "" (empty)`,
		`spec.config["k2"] remove-key (a key removed)`,
	}, strings.Split(render(cs), "\n"))

	t.Run("the added key is new", func(t *testing.T) {
		cs := changes(t, s, object(map[string]any{"config": map[string]any{"converge-added": "v"}}), Rules{})
		assert.Equal(t, []string{`spec.config["converge-added-2"] add-key`}, ops(filter(cs, false)[:1]))
	})

	t.Run("only the first three and the last entries are visited", func(t *testing.T) {
		config := map[string]any{}
		for i := range 10 {
			config[fmt.Sprintf("k%d", i)] = "v"
		}
		var removed []string
		for _, c := range changes(t, s, object(map[string]any{"config": config}), Rules{}) {
			if c.Op == OpRemoveKey {
				removed = append(removed, c.Path)
			}
		}
		assert.Equal(t, []string{`spec.config["k0"]`, `spec.config["k1"]`, `spec.config["k2"]`, `spec.config["k9"]`}, removed)
	})
}

func render(cs []Change) string {
	var lines []string
	for _, c := range cs {
		lines = append(lines, c.String())
	}
	return strings.Join(lines, "\n")
}

func TestChangesKeepToTheRules(t *testing.T) {
	s := schemaOf(t, poolSchema)
	obj := pool()

	t.Run("an excluded path and what is under it are not changed", func(t *testing.T) {
		cs := changes(t, s, obj, Rules{Exclude: []string{"spec.config", "spec.targets[0]"}})
		for _, c := range cs {
			assert.False(t, strings.HasPrefix(c.Path, "spec.config"), c.String())
			assert.False(t, strings.HasPrefix(c.Path, "spec.targets[0]"), c.String())
		}
		assert.Contains(t, ops(cs), "spec.targets reorder", "a change above an excluded path is made")
		assert.Contains(t, ops(cs), "spec.targets[1].port set")
	})

	t.Run("a pinned value is not altered from anywhere", func(t *testing.T) {
		cs := changes(t, s, obj, Rules{Pin: []string{`spec["targets"][0].name`}})
		got := ops(cs)
		assert.NotContains(t, got, "spec.targets[0].name set")
		assert.NotContains(t, got, "spec.targets[0] remove-item", "removing the first item moves the second's name there")
		assert.NotContains(t, got, "spec.targets reorder")
		assert.NotContains(t, got, "spec.targets remove")
		assert.Contains(t, got, "spec.targets[2] add-item")
		assert.Contains(t, got, "spec.targets[0].port set")
	})

	t.Run("values to try", func(t *testing.T) {
		cs := changes(t, s, obj, Rules{Values: map[string][]any{
			"spec.replicas":        {5, 3, 42},
			"metadata.labels":      {map[string]any{"a": "b"}},
			"spec.missing.x":       {1},
			`spec.config["k1"]`:    {"other"},
			"spec.targets[1].name": {"a"},
		}})
		assert.Contains(t, valid(cs), Change{Path: "spec.replicas", Op: OpSet, Value: int64(5), Why: "from the rules"})
		assert.Contains(t, invalid(cs), Change{Path: "spec.replicas", Op: OpSet, Value: int64(42), Why: "from the rules", Invalid: true})
		assert.NotContains(t, sets(at(cs, "spec.replicas")), int64(3), "the current value is no change")
		assert.Contains(t, valid(cs), Change{Path: "metadata.labels", Op: OpSet, Value: map[string]any{"a": "b"}, Why: "from the rules"}, "outside the root")
		assert.Contains(t, valid(cs), Change{Path: `spec.config["k1"]`, Op: OpSet, Value: "other", Why: "from the rules"})
		assert.Contains(t, invalid(cs), Change{Path: "spec.targets[1].name", Op: OpSet, Value: "a", Why: "from the rules", Invalid: true}, "a duplicate key")
		assert.Empty(t, at(cs, "spec.missing.x"))
	})

	t.Run("pins win over values", func(t *testing.T) {
		cs := changes(t, s, obj, Rules{Pin: []string{"spec.replicas"}, Values: map[string][]any{"spec.replicas": {5}}})
		assert.Empty(t, at(cs, "spec.replicas"))
	})

	for _, r := range []Rules{{Pin: []string{"spec["}}, {Exclude: []string{""}}, {Values: map[string][]any{"spec..x": {1}}}} {
		_, err := Changes(s, obj, "spec", r, nil)
		assert.Error(t, err, "%+v", r)
	}
}

// The caller's validate decides what is allowed.
func TestChangesAreJudgedByValidate(t *testing.T) {
	s := schemaOf(t, poolSchema)
	obj := pool()
	atMostFive := func(o map[string]any) error {
		replicas, _ := get(o, path{{key: "spec"}, {key: "replicas"}})
		if n, _ := replicas.(int64); n > 5 {
			return errors.New("too many")
		}
		return nil
	}
	cs, err := Changes(s, obj, "spec", Rules{}, atMostFive)
	require.NoError(t, err)
	assert.Equal(t, []any{int64(0), int64(4), int64(2), int64(-1)}, sets(valid(at(cs, "spec.replicas"))), "below the minimum is this validate's to refuse")
	assert.Contains(t, invalid(cs), Change{Path: "spec.replicas", Op: OpSet, Value: int64(10), Why: "its maximum", Invalid: true})
	assert.Contains(t, valid(cs), Change{Path: "spec.replicas", Op: OpRemove, Why: "removed (required)"}, "this validate allows it")

	none := func(map[string]any) error { return errors.New("no") }
	cs, err = Changes(s, obj, "spec", Rules{}, none)
	require.NoError(t, err)
	assert.Len(t, cs, maxInvalid)
	assert.Empty(t, valid(cs))
}

// The default validation is the server's, of an update: a CEL rule across
// fields and a transition rule refuse changes.
func TestChangesRefuseWhatCELRulesRefuse(t *testing.T) {
	s := schemaOf(t, `
type: object
x-kubernetes-validations:
- {rule: "self.min <= self.max", message: min above max}
properties:
  storageClass:
    type: string
    x-kubernetes-validations: [{rule: "self == oldSelf", message: immutable}]
  min: {type: integer}
  max: {type: integer}
`)
	cs := changes(t, s, object(map[string]any{"storageClass": "fast", "min": int64(1), "max": int64(3)}), Rules{})
	for _, c := range at(cs, "spec.storageClass") {
		assert.Equal(t, c.Op == OpSet, c.Invalid, c.String())
	}
	assert.Contains(t, invalid(cs), Change{Path: "spec.max", Op: OpSet, Value: int64(0), Why: "zero", Invalid: true})
	assert.Contains(t, valid(cs), Change{Path: "spec.max", Op: OpSet, Value: int64(4), Why: "one more"})
}

// A value the schema says nothing about, or that is not of its schema's
// type, is left alone; the rest of the object is still changed, and the
// server's ratcheting lets it be.
func TestChangesLeaveAloneWhatTheyCannotRead(t *testing.T) {
	s := schemaOf(t, `
type: object
required: [replicas]
properties:
  replicas: {type: integer, minimum: 0, maximum: 10}
  note: {type: string}
  extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
  tags: {type: array, items: {type: string}}
`)
	obj := object(map[string]any{
		"replicas": "three",
		"note":     "hi",
		"extra":    map[string]any{"a": int64(1)},
		"tags":     "not a list",
		"nothing":  true,
	})
	cs := changes(t, s, obj, Rules{})
	assert.Empty(t, at(cs, "spec.replicas"))
	assert.Empty(t, at(cs, "spec.tags"))
	assert.Equal(t, []string{"spec.extra remove", "spec.note set", "spec.note set", "spec.note remove"}, ops(cs))
	assert.Empty(t, invalid(cs))
}

func TestChangesAreDeterministic(t *testing.T) {
	s := schemaOf(t, poolSchema)
	first := changes(t, s, pool(), Rules{Exclude: []string{"spec.note"}, Values: map[string][]any{"spec.replicas": {7}, "spec.paused": {true}}})
	require.NotEmpty(t, first)
	for range 5 {
		assert.Equal(t, first, changes(t, s, pool(), Rules{Exclude: []string{"spec.note"}, Values: map[string][]any{"spec.replicas": {7}, "spec.paused": {true}}}))
	}
}

func TestChangesDoNotChangeTheirInput(t *testing.T) {
	s := schemaOf(t, poolSchema)
	obj := pool()
	changes(t, s, obj, Rules{})
	assert.Equal(t, pool(), obj)
}

func TestChangesRefuseWhatTheyCannotStartFrom(t *testing.T) {
	s := schemaOf(t, poolSchema)
	for _, tc := range []struct {
		name string
		s    *structuralschema.Structural
		obj  map[string]any
		root string
	}{
		{"no schema", nil, pool(), "spec"},
		{"no object", s, nil, "spec"},
		{"an object without its root", s, map[string]any{"kind": "Pool"}, "spec"},
		{"a root the schema lacks", s, pool(), "status"},
		{"an empty root", s, pool(), ""},
		{"a root that does not parse", s, pool(), "spec["},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Changes(tc.s, tc.obj, tc.root, Rules{}, nil)
			assert.Error(t, err)
		})
	}
}

// Deep nesting, a schema that refers to itself, and a long list are walked
// within the caps.
func TestChangesStayWithinTheirCaps(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		leaf := structuralschema.Structural{Generic: structuralschema.Generic{Type: "integer"}}
		node := leaf
		var obj any = int64(1)
		for range 30 {
			node = structuralschema.Structural{
				Generic:    structuralschema.Generic{Type: "object"},
				Properties: map[string]structuralschema.Structural{"c": node},
			}
			obj = map[string]any{"c": obj}
		}
		root := &structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"}, Properties: map[string]structuralschema.Structural{"spec": node}}
		cs, err := Changes(root, map[string]any{"spec": obj}, "spec", Rules{}, func(map[string]any) error { return nil })
		require.NoError(t, err)
		require.NotEmpty(t, cs)
		for _, c := range cs {
			assert.LessOrEqual(t, strings.Count(c.Path, "."), maxDepth, c.Path)
		}
	})

	t.Run("a schema that is its own items", func(t *testing.T) {
		s := &structuralschema.Structural{Generic: structuralschema.Generic{Type: "array"}}
		s.Items = s
		var obj any = []any{}
		for range 40 {
			obj = []any{obj}
		}
		root := &structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"}, Properties: map[string]structuralschema.Structural{"spec": *s}}
		cs, err := Changes(root, map[string]any{"spec": obj}, "spec", Rules{}, func(map[string]any) error { return nil })
		require.NoError(t, err)
		for _, c := range cs {
			assert.LessOrEqual(t, strings.Count(c.Path, "["), maxDepth+1, c.Path)
		}
	})

	t.Run("a long list", func(t *testing.T) {
		s := schemaOf(t, `{type: object, properties: {x: {type: array, items: {type: integer, minimum: 0}}}}`)
		list := make([]any, 1000)
		for i := range list {
			list[i] = int64(i)
		}
		seen := map[string]bool{}
		for _, c := range changes(t, s, object(map[string]any{"x": list}), Rules{}) {
			if c.Op == OpSet {
				seen[c.Path] = true
			}
		}
		assert.Equal(t, map[string]bool{"spec.x[0]": true, "spec.x[1]": true, "spec.x[2]": true, "spec.x[999]": true}, seen)
	})
}

// A change the schema's defaults undo is no change: a defaulted field
// removed, or set to its default.
func TestNoOp(t *testing.T) {
	s := schemaOf(t, `
type: object
properties:
  port: {type: integer, default: 8080}
  replicas: {type: integer}
`)
	obj := object(map[string]any{"port": int64(8080), "replicas": int64(2)})
	for _, tc := range []struct {
		c    Change
		noop bool
	}{
		{Change{Path: "spec.port", Op: OpRemove}, true},
		{Change{Path: "spec.port", Op: OpSet, Value: int64(8080)}, true},
		{Change{Path: "spec.port", Op: OpSet, Value: int64(80)}, false},
		{Change{Path: "spec.replicas", Op: OpRemove}, false},
	} {
		changed, err := Apply(obj, tc.c)
		require.NoError(t, err)
		assert.Equal(t, tc.noop, NoOp(s, obj, changed), "%s", tc.c)
	}
	assert.Equal(t, int64(8080), obj["spec"].(map[string]any)["port"], "obj is not modified")

	// The object as a result read back from its file holds it: its
	// numbers are float64, the schema's default an int64.
	read := object(map[string]any{"port": float64(8080), "replicas": float64(2)})
	removed, err := Apply(read, Change{Path: "spec.port", Op: OpRemove})
	require.NoError(t, err)
	assert.True(t, NoOp(s, read, removed), "a defaulted field removed from an object read back")
	set, err := Apply(read, Change{Path: "spec.replicas", Op: OpSet, Value: int64(2)})
	require.NoError(t, err)
	assert.True(t, NoOp(s, read, set), "a float64 2 set to int64 2")
}
