package expect

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// y decodes a YAML flow value (JSON is YAML), so tables read like
// scenario files.
func y(t testing.TB, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}

func strs(ms []Mismatch) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

func TestMatch(t *testing.T) {
	dep := deployment(t)
	for _, tc := range []struct {
		name             string
		expected, actual any
		want             []string
	}{
		{
			name:     "partial object matches",
			expected: y(t, `{"spec": {"replicas": 3}, "metadata": {"labels": {"app": "web"}}}`),
			actual:   dep,
		},
		{
			name:     "value differs",
			expected: y(t, `{"spec": {"replicas": 2}}`),
			actual:   dep,
			want:     []string{"spec.replicas: expected 2, got 3"},
		},
		{
			name:     "missing key",
			expected: y(t, `{"metadata": {"labels": {"app": "web", "team": "shop"}}}`),
			actual:   dep,
			want:     []string{"metadata.labels.team: missing"},
		},
		{
			name:     "key with dots and slashes quoted in the path",
			expected: y(t, `{"metadata": {"annotations": {"converge.dev/max-replicas": "4"}}}`),
			actual:   dep,
			want:     []string{`metadata.annotations["converge.dev/max-replicas"]: expected "4", got "5"`},
		},
		{
			name:     "list element matched out of order",
			expected: y(t, `{"status": {"conditions": [{"type": "Available", "status": "True"}]}}`),
			actual:   dep,
		},
		{
			name:     "no list element matches",
			expected: y(t, `{"status": {"conditions": [{"type": "Progressing"}, {"type": "Ready", "status": "True"}]}}`),
			actual:   dep,
			want:     []string{`status.conditions[1]: no element matches {status: "True", type: Ready}`},
		},
		{
			name:     "nested lists of maps, in any order",
			expected: y(t, `{"spec": {"template": {"spec": {"containers": [{"name": "proxy"}, {"name": "web", "ports": [{"name": "metrics"}, {"containerPort": 8080}], "env": [{"name": "WORKERS", "value": "4"}]}]}}}}`),
			actual:   dep,
		},
		{
			name:     "nested list element missing",
			expected: y(t, `{"spec": {"template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 8443}]}]}}}}`),
			actual:   dep,
			want:     []string{"spec.template.spec.containers[0]: no element matches {name: web, ports: [{containerPort: 8443}]}"},
		},
		{
			name:     "bipartite: a greedy first pick would take the only match of the second",
			expected: y(t, `[{"a": 1}, {"a": 1, "b": 2}]`),
			actual:   y(t, `[{"a": 1, "b": 2}, {"a": 1}]`),
		},
		{
			name:     "each element matches a distinct one",
			expected: y(t, `[{"a": 1}, {"a": 1}]`),
			actual:   y(t, `[{"a": 1, "b": 2}, {"b": 3}]`),
			want:     []string{"[1]: every element matching {a: 1} is taken by another expected element"},
		},
		{
			name:     "extra actual elements are ignored",
			expected: y(t, `{"l": [3, 1]}`),
			actual:   y(t, `{"l": [1, 2, 3, 4]}`),
		},
		{
			name:     "longer expected list",
			expected: y(t, `{"l": [1, 2, 3]}`),
			actual:   y(t, `{"l": [2]}`),
			want:     []string{"l[0]: no element matches 1", "l[2]: no element matches 3"},
		},
		{
			name:     "empty expected list and map match anything of their kind",
			expected: y(t, `{"l": [], "m": {}}`),
			actual:   y(t, `{"l": [1], "m": {"a": 1}}`),
		},
		{
			name:     "empty expected map still needs the key",
			expected: y(t, `{"m": {}}`),
			actual:   y(t, `{}`),
			want:     []string{"m: missing"},
		},
		{
			name:     "null matches missing and null",
			expected: y(t, `{"a": null, "b": null, "c": {"d": null}}`),
			actual:   y(t, `{"b": null, "c": {}}`),
		},
		{
			name:     "null does not match a value",
			expected: y(t, `{"a": null}`),
			actual:   y(t, `{"a": false}`),
			want:     []string{"a: expected null, got false"},
		},
		{
			name:     "a value does not match null",
			expected: y(t, `{"a": 0}`),
			actual:   y(t, `{"a": null}`),
			want:     []string{"a: expected 0, got null"},
		},
		{
			name:     "quantities",
			expected: y(t, `{"mem": "1Gi", "cpu": "500m", "n": 1, "m": "2", "k": "1k"}`),
			actual:   y(t, `{"mem": "1024Mi", "cpu": "0.5", "n": "1", "m": 2.0, "k": 1000}`),
		},
		{
			name:     "quantities that differ",
			expected: y(t, `{"mem": "1Gi", "cpu": 0.5}`),
			actual:   y(t, `{"mem": "1G", "cpu": "250m"}`),
			want:     []string{`cpu: expected 0.5, got "250m"`, `mem: expected "1Gi", got "1G"`},
		},
		{
			name:     "number and string that is not a quantity",
			expected: y(t, `{"a": 3, "b": "three"}`),
			actual:   y(t, `{"a": "three", "b": 3}`),
			want:     []string{`a: expected 3, got three`, `b: expected three, got 3`},
		},
		{
			name:     "numbers of different Go types",
			expected: map[string]any{"a": 3, "b": int32(3), "c": 3.0, "d": json.Number("3"), "e": uint8(3), "f": json.Number("0.5")},
			actual:   map[string]any{"a": int64(3), "b": 3.0, "c": int64(3), "d": int64(3), "e": float32(3), "f": 0.5},
		},
		{
			name:     "numbers compare exactly",
			expected: map[string]any{"a": 3, "b": int64(1<<53 + 1)},
			actual:   map[string]any{"a": 3.5, "b": float64(1 << 53)},
			want:     []string{"a: expected 3, got 3.5", "b: expected 9007199254740993, got 9007199254740992"},
		},
		{
			name:     "booleans are not strings",
			expected: y(t, `{"a": true, "b": "true"}`),
			actual:   y(t, `{"a": "true", "b": true}`),
			want:     []string{`a: expected true, got "true"`, `b: expected "true", got true`},
		},
		{
			name:     "kinds differ",
			expected: y(t, `{"spec": {"replicas": 3}, "l": [1], "s": "x"}`),
			actual:   y(t, `{"spec": [1], "l": {"a": 1}, "s": {"a": 1}}`),
			want:     []string{"l: expected [1], got {a: 1}", "s: expected x, got {a: 1}", "spec: expected {replicas: 3}, got [1]"},
		},
		{
			name:     "maps and slices of other Go types",
			expected: map[string]any{"labels": map[string]string{"app": "web"}, "ports": []int{9090}},
			actual:   y(t, `{"labels": {"app": "web", "x": "y"}, "ports": [8080, 9090]}`),
		},
		{
			name:     "an unstructured object",
			expected: y(t, `{"spec": {"replicas": 3}}`),
			actual:   &unstructured.Unstructured{Object: dep},
		},
		{
			name:     "root scalars",
			expected: "a",
			actual:   "b",
			want:     []string{"expected a, got b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nilIfEmpty(strs(Match(tc.expected, tc.actual))))
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestMismatchFields(t *testing.T) {
	actual := y(t, `{"s": {"c": [{"t": "A"}], "r": 2}}`)
	got := Match(y(t, `{"s": {"c": [{"t": "B"}], "r": 3, "x": 1}}`), actual)
	require.Len(t, got, 3)
	assert.Equal(t, Mismatch{Path: "s.c[0]", Expected: map[string]any{"t": "B"}, Actual: []any{map[string]any{"t": "A"}}, Reason: ReasonNoMatch}, got[0])
	assert.Equal(t, Mismatch{Path: "s.r", Expected: float64(3), Actual: float64(2), Reason: ReasonDiffers}, got[1])
	assert.Equal(t, Mismatch{Path: "s.x", Expected: float64(1), Reason: ReasonMissing}, got[2])
}

func TestMatchCap(t *testing.T) {
	expected := map[string]any{}
	for i := range 30 {
		expected[fmt.Sprintf("k%02d", i)] = i
	}
	got := Match(expected, map[string]any{})
	require.Len(t, got, MaxMismatches)
	for i, m := range got {
		assert.Equal(t, fmt.Sprintf("k%02d: missing", i), m.String())
	}

	// Also across lists: 30 elements, none matching.
	list := make([]any, 30)
	for i := range list {
		list[i] = map[string]any{"num": i}
	}
	got = Match(map[string]any{"a": list, "b": 1}, map[string]any{"a": []any{}, "b": 2})
	require.Len(t, got, MaxMismatches)
	assert.Equal(t, "a[0]: no element matches {num: 0}", got[0].String())
	assert.Equal(t, "a[19]: no element matches {num: 19}", got[19].String())
}

func TestMatchTooDeep(t *testing.T) {
	var deep any = "x"
	for range maxDepth + 5 {
		deep = map[string]any{"a": deep}
	}
	got := Match(deep, deep)
	require.Len(t, got, 1)
	assert.Equal(t, ReasonTooDeep, got[0].Reason)
}

func TestMatchLongValuesAreCut(t *testing.T) {
	got := Match(strings.Repeat("é", 200), "b")
	require.Len(t, got, 1)
	s := got[0].String()
	assert.Less(t, len(s), 2*maxFormatted)
	assert.True(t, strings.HasSuffix(s, `..., got b`), s)
}

// TestMatchLargeLists checks that lists of thousands of elements are
// matched in reasonable time, shuffled, and when elements repeat so that
// each matches every other.
func TestMatchLargeLists(t *testing.T) {
	const n = 2000
	const same = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	expected := make([]any, n)
	actual := make([]any, n)
	for i := range n {
		expected[i] = map[string]any{"name": fmt.Sprintf("pod-%d", i)}
		actual[i] = map[string]any{"name": fmt.Sprintf("pod-%d", i), "phase": "Running"}
	}
	rng.Shuffle(n, func(i, j int) { actual[i], actual[j] = actual[j], actual[i] })
	assert.Empty(t, Match(expected, actual))

	running := make([]any, same)
	for i := range running {
		running[i] = map[string]any{"phase": "Running"}
	}
	assert.Empty(t, Match(running, actual[:same]))
	got := Match(running, actual[:same-1])
	require.Len(t, got, 1)
	assert.Equal(t, ReasonTaken, got[0].Reason)
}

// TestMaxMatching compares maxMatching with a brute force search on small
// random graphs.
func TestMaxMatching(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		left, right := rng.IntN(7), rng.IntN(7)
		adj := make([][]int32, left)
		for i := range adj {
			for j := range right {
				if rng.IntN(3) == 0 {
					adj[i] = append(adj[i], int32(j))
				}
			}
		}
		pair := maxMatching(adj, right)
		size := 0
		used := map[int32]bool{}
		for i, j := range pair {
			if j < 0 {
				continue
			}
			require.Contains(t, adj[i], j, "pairs only along edges")
			require.False(t, used[j], "distinct partners")
			used[j] = true
			size++
		}
		require.Equal(t, bruteMatching(adj, 0, map[int32]bool{}), size, "maximum for %v", adj)
	}
}

func bruteMatching(adj [][]int32, i int, used map[int32]bool) int {
	if i == len(adj) {
		return 0
	}
	best := bruteMatching(adj, i+1, used)
	for _, j := range adj[i] {
		if !used[j] {
			used[j] = true
			best = max(best, 1+bruteMatching(adj, i+1, used))
			used[j] = false
		}
	}
	return best
}
