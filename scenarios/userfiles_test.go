package scenarios_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/scenarios"
)

// loadWithin loads file, failing t when the load has not returned after a
// deadline: a load that waits on a pipe shows as a failure, not a hang.
func loadWithin(t *testing.T, load func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- load() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the load still waits after 10s")
		return nil
	}
}

// A pipe named where a scenario or its objects are read (the scenario
// file, an object file, a file in an object folder), by a relative path in
// the scenario's folder, is refused by name and kind; nothing waits on it.
func TestPipesAreRefusedNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	mkfifo := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
		return p
	}
	scenario := func(name, objects string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(head+"objects: ["+objects+"]\n"), 0o644))
		return p
	}
	fifo := mkfifo("objects.yaml")
	devNull, err := filepath.Rel(dir, "/dev/null")
	require.NoError(t, err)
	mkfifo("folder/b.yaml")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "folder", "a.yaml"), []byte("{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"), 0o644))

	for file, want := range map[string]string{
		scenario("object.yaml", "{file: objects.yaml}"): fifo + " is a named pipe (FIFO), not a regular file",
		scenario("dot.yaml", "{file: ./objects.yaml}"):  fifo + " is a named pipe (FIFO), not a regular file",
		scenario("folder.yaml", "{file: folder}"):       filepath.Join(dir, "folder", "b.yaml") + " is a named pipe (FIFO)",
		mkfifo("scenario.yaml"):                         filepath.Join(dir, "scenario.yaml") + " is a named pipe (FIFO)",
		scenario("device.yaml", "{file: "+devNull+"}"):  "is a character device",
	} {
		err := loadWithin(t, func() error { _, err := scenarios.Load(file); return err })
		require.Error(t, err, file)
		assert.ErrorContains(t, err, want, file)
	}

	// Through any fs.FS, not only the file system's.
	err = loadWithin(t, func() error {
		_, err := scenarios.ParseFS(os.DirFS(dir), "object.yaml", "")
		return err
	})
	assert.ErrorContains(t, err, "objects.yaml is a named pipe (FIFO)")
	err = loadWithin(t, func() error { _, err := scenarios.ParseFS(os.DirFS(dir), "scenario.yaml", ""); return err })
	require.ErrorIs(t, err, userfile.ErrNotRegular)
	assert.EqualError(t, err, "scenario.yaml is a named pipe (FIFO), not a regular file: only regular files are read or written")
}
