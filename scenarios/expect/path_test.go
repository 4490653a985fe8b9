package expect

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
)

func key(k string) Segment { return Segment{Key: k, Index: -1} }
func index(i int) Segment  { return Segment{Index: i} }

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Path
		// canonical is String() of the result, when not path itself.
		canonical string
	}{
		{path: "status.readyReplicas", want: Path{key("status"), key("readyReplicas")}},
		{path: `metadata.annotations["converge.dev/max-replicas"]`, want: Path{key("metadata"), key("annotations"), key("converge.dev/max-replicas")}},
		{path: `metadata.annotations['a.b/c']`, want: Path{key("metadata"), key("annotations"), key("a.b/c")}, canonical: `metadata.annotations["a.b/c"]`},
		{path: "spec.items[0].name", want: Path{key("spec"), key("items"), index(0), key("name")}},
		{path: "a[1][22]", want: Path{key("a"), index(1), index(22)}},
		{path: "[3].x", want: Path{index(3), key("x")}},
		{path: `["a b"].c`, want: Path{key("a b"), key("c")}},
		{path: ".status.phase", want: Path{key("status"), key("phase")}, canonical: "status.phase"},
		{path: "a.b-c_d.0", want: Path{key("a"), key("b-c_d"), key("0")}},
		{path: `a["x\"y\\z"]`, want: Path{key("a"), key(`x"y\z`)}},
		{path: `a[""]`, want: Path{key("a"), key("")}},
		{path: `a["é.ü"]`, want: Path{key("a"), key("é.ü")}},
		{path: "a[007]", want: Path{key("a"), index(7)}, canonical: "a[7]"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := ParsePath(tc.path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			canonical := tc.canonical
			if canonical == "" {
				canonical = tc.path
			}
			assert.Equal(t, canonical, got.String())
		})
	}
}

func TestParsePathErrors(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		column     int
		msg        string
	}{
		{"empty", "", 1, "empty path"},
		{"only a dot", ".", 2, "empty key"},
		{"empty segment", "a..b", 3, "empty key"},
		{"trailing dot", "a.", 3, "empty key"},
		{"dot before bracket", "a.[0]", 3, `unexpected '[', want a key`},
		{"space", "a b", 2, `unexpected ' ', want . or [`},
		{"stray bracket", "a]", 2, `unexpected ']', want . or [`},
		{"unterminated bracket", "a[", 2, "unterminated ["},
		{"unterminated index", "a[0", 2, "unterminated ["},
		{"index then junk", "a[0x]", 2, "unterminated ["},
		{"unterminated quote", `a["b`, 3, "unterminated string"},
		{"unterminated quote ending in a backslash", `a["b\`, 3, "unterminated string"},
		{"unterminated single quote", `a['b`, 3, "unterminated string"},
		{"quote without bracket end", `a["b"`, 2, "unterminated ["},
		{"bad escape", `a["\q"]`, 3, "invalid quoted string"},
		{"negative index", "a[-1]", 3, `unexpected '-', want an index or a quoted key`},
		{"huge index", "a[99999999999999999999999]", 3, "index larger than 1073741824"},
		{"too long", strings.Repeat("a", MaxPathLength+1), MaxPathLength + 1, "longer than 1024 bytes"},
		{"key starting with a symbol", "a.$b", 3, `unexpected '$', want a key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePath(tc.path)
			require.Error(t, err)
			assert.Nil(t, p)
			var pe *PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.column, pe.Column)
			assert.Equal(t, tc.msg, pe.Message)
			assert.Contains(t, err.Error(), "column")
			assert.Less(t, len(err.Error()), 200, "the path is cut in the message")
		})
	}
}

func TestField(t *testing.T) {
	dep := deployment(t)
	dep["spec"].(map[string]any)["paused"] = nil
	for _, tc := range []struct {
		path string
		want any
		ok   bool
	}{
		{"status.readyReplicas", int64(3), true},
		{`metadata.annotations["converge.dev/max-replicas"]`, "5", true},
		{"spec.template.spec.containers[1].name", "proxy", true},
		{"status.conditions[0].type", "Progressing", true},
		{"metadata.labels", map[string]any{"app": "web", "tier": "frontend"}, true},
		{"spec.paused", nil, true},
		{"spec.template.spec.containers[5].name", nil, false},
		{"spec.template.spec.containers.name", nil, false},
		{"spec.replicas.x", nil, false},
		{"spec.replicas[0]", nil, false},
		{"metadata.labels.missing", nil, false},
		{"spec..replicas", nil, false},
		{"[0]", nil, false},
	} {
		got, ok := Field(dep, tc.path)
		assert.Equal(t, tc.ok, ok, tc.path)
		assert.Equal(t, tc.want, got, tc.path)
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want float64
		ok   bool
	}{
		{int64(3), 3, true},
		{3, 3, true},
		{int32(-2), -2, true},
		{uint64(math.MaxUint64), math.MaxUint64, true},
		{2.5, 2.5, true},
		{float32(0.5), 0.5, true},
		{json.Number("1.5"), 1.5, true},
		{"250m", 0.25, true},
		{"1Gi", 1 << 30, true},
		{"3", 3, true},
		{resource.MustParse("2k"), 2000, true},
		{ptr(resource.MustParse("100m")), 0.1, true},
		{(*resource.Quantity)(nil), 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{true, 0, false},
		{nil, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{[]any{1}, 0, false},
	} {
		got, ok := Number(tc.v)
		assert.Equal(t, tc.ok, ok, "%#v", tc.v)
		assert.InDelta(t, tc.want, got, 1e-9, "%#v", tc.v)
	}
}

func ptr[T any](v T) *T { return &v }
