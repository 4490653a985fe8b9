package check_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/golden"
	"github.com/converge-lab/converge/scenarios/check"
)

var update = flag.Bool("update", false, "rewrite the generated list of checks in docs/guide.md")

// The guide's list of built-in checks is the registry's: a check added,
// renamed or described anew without the list following fails here (go
// test ./scenarios/check -update rewrites it).
func TestGuideListsTheChecks(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "guide.md")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	const begin, end = "<!-- checks: generated from check.All by TestGuideListsTheChecks (go test ./scenarios/check -update) -->\n", "<!-- end checks -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "docs/guide.md has the markers of the generated list")
	want := doc[:i+len(begin)] + check.Markdown() + doc[j:]
	golden.Check(t, path, want, *update, "go test ./scenarios/check -update")
}

// Every check says what it catches and what it reads, under a name of
// its own.
func TestEveryCheckIsDescribed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range check.All() {
		require.NotEmpty(t, c.Name)
		require.False(t, seen[c.Name], "two checks named %s", c.Name)
		seen[c.Name] = true
		require.NotEmpty(t, c.Kind, c.Name)
		require.True(t, strings.HasSuffix(c.Catches, "."), "%s: what it catches is a sentence", c.Name)
		require.NotEmpty(t, c.Reads, c.Name)
	}
}
