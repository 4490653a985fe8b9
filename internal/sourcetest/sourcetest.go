// Package sourcetest reads the module's own code for the tests that hold
// it to a rule (no fault or backend named outside its registry).
package sourcetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Literal is a string literal of a non-test Go file.
type Literal struct {
	// File is the file's path from the module's root, with slashes.
	File  string
	Line  int
	Value string
}

// StringLiterals are the string literals of the non-test Go files under
// root, the module's folder, leaving out other modules, bin, testdata and
// the folders (from root, with slashes) skip names. It fails t on a file
// it cannot parse, and when it reached fewer than 100 files.
func StringLiterals(t testing.TB, root string, skip ...string) []Literal {
	t.Helper()
	var out []Literal
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path == root {
				return nil
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (hack's tools)
			}
			switch d.Name() {
			case "bin", "testdata", ".git":
				return filepath.SkipDir
			}
			for _, s := range skip {
				if rel == s {
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
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, Literal{File: rel, Line: fset.Position(lit.Pos()).Line, Value: s})
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk reached the module's code")
	return out
}
