package chaos_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
)

// No code outside this package names a fault: what the harness does with
// one it asks of the fault (Available, PlaneOf), so a fault added to the
// registry is scheduled, refused and judged without a list elsewhere to
// keep up. A string literal equal to a registered fault's name in a
// non-test file of another package fails this test.
func TestNoFaultNamedOutsideTheRegistry(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	names := chaos.Names()
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root {
				// Another module (hack's tools), or what the build and
				// tests leave: not the harness's code.
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			switch d.Name() {
			case "bin", "testdata", ".git", "chaos":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+" names fault "+s)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk reached the repository's code")
	assert.Empty(t, found, "ask the fault what it needs or does (chaos.Fault.Available, chaos.PlaneOf) instead")
}
