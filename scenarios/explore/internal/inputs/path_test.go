package inputs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPathsReadBackAsWritten(t *testing.T) {
	for _, p := range []string{
		"spec",
		"spec.replicas",
		"spec.targets[1]",
		"spec.targets[1].name",
		`spec.config["key"]`,
		`spec.config["app.kubernetes.io/name"]`,
		`spec.config["with \"quotes\" and ]"].x[0]`,
		`spec["a.b"]`,
		`spec.list[0][1]`,
	} {
		parsed, err := parsePath(p)
		require.NoError(t, err, p)
		assert.Equal(t, p, parsed.String())
	}
}

func TestPathsThatDoNotParse(t *testing.T) {
	for _, p := range []string{"", ".spec", "spec.", "spec..x", "spec[", "spec[-1]", "spec[x]", `spec["x`, `spec["x"`, `spec["x"]y`, "spec[1]x"} {
		_, err := parsePath(p)
		assert.Error(t, err, p)
	}
}

// Fields and map keys are one thing to compare: a rule may write either.
func TestPathsCompareFieldsAndKeysAlike(t *testing.T) {
	a, err := parsePath(`spec.config.x[2]`)
	require.NoError(t, err)
	b, err := parsePath(`spec["config"]`)
	require.NoError(t, err)
	assert.True(t, a.within(b))
	assert.False(t, b.within(a))
	assert.Equal(t, a.id(), mustPath(t, `spec["config"]["x"][2]`).id())
	assert.False(t, mustPath(t, "spec.x[0]").within(mustPath(t, `spec.x["0"]`)), "an index is not a key")
}

func mustPath(t *testing.T, s string) path {
	t.Helper()
	p, err := parsePath(s)
	require.NoError(t, err)
	return p
}

func TestFieldUnder(t *testing.T) {
	for p, want := range map[string]string{
		"spec.port":              "port",
		"spec.targets[1].port":   "targets",
		`spec.config["a.b"]`:     "config",
		`spec["odd.name"].x`:     "odd.name",
		"spec.template.spec.foo": "template",
	} {
		got, err := FieldUnder("spec", p)
		require.NoError(t, err, p)
		assert.Equal(t, want, got, p)
	}
	for _, p := range []string{"spec", "status.x", "spec[", "metadata.name"} {
		_, err := FieldUnder("spec", p)
		assert.Error(t, err, p)
	}
}
