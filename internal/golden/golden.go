// Package golden keeps a generated file in step with the code that makes
// it: the tests behind the generated docs call Check.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Check fails t unless the file at path holds want, saying to run rewrite
// (the go test command with -update); with update it writes want there
// instead.
func Check(t testing.TB, path, want string, update bool, rewrite string) {
	t.Helper()
	if update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run %s", rewrite)
	require.Equal(t, want, string(got), "%s differs from what the code makes of it: run %s", filepath.ToSlash(path), rewrite)
}
