package userfile

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within fails t when f has not returned after a deadline: a read that
// blocks on a pipe shows as a failure, not a hung test.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still blocked after 10s", what)
		var zero T
		return zero
	}
}

// Every kind of file that is not a regular one is refused by name and
// kind, at once, whether named directly or through a link; regular files
// and links to them are read.
func TestOnlyRegularFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(regular, []byte("name: a\n"), 0o644))
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	folder := filepath.Join(dir, "folder.yaml")
	require.NoError(t, os.Mkdir(folder, 0o755))
	link := filepath.Join(dir, "link.yaml")
	require.NoError(t, os.Symlink(fifo, link))
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.Symlink(regular, good))

	for name, kind := range map[string]string{
		fifo:        "a named pipe (FIFO)",
		link:        "a named pipe (FIFO)",
		sock:        "a socket",
		folder:      "a folder",
		"/dev/null": "a character device",
	} {
		err := within(t, "ReadFile "+name, func() error { _, err := ReadFile(name, 0); return err })
		require.ErrorIs(t, err, ErrNotRegular, name)
		assert.EqualError(t, err, name+" is "+kind+", not a regular file: only regular files are read or written")
		assert.ErrorIs(t, Check(name), ErrNotRegular, name)
	}
	for _, name := range []string{regular, good} {
		data, err := ReadFile(name, 0)
		require.NoError(t, err, name)
		assert.Equal(t, "name: a\n", string(data))
		assert.NoError(t, Check(name))
	}
	_, err = ReadFile(filepath.Join(dir, "nowhere.yaml"), 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// The bound a reader sets is kept: a byte past it is refused.
func TestReadFileKeepsItsBound(t *testing.T) {
	name := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(name, []byte(strings.Repeat("x", 100)), 0o644))
	data, err := ReadFile(name, 100)
	require.NoError(t, err)
	assert.Len(t, data, 100)
	_, err = ReadFile(name, 99)
	assert.EqualError(t, err, name+" is larger than 99 bytes, the most read of it")
}

// Through FS, folders open (so fs.ReadDir and fs.Glob work) and regular
// files read; a pipe is refused, by fs.Stat too.
func TestFSOpensFoldersAndRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "b.yaml"), 0o644))
	fsys := FS(dir)
	entries, err := fs.ReadDir(fsys, ".")
	require.NoError(t, err)
	assert.Len(t, entries, 2)
	matches, err := fs.Glob(fsys, "*.yaml")
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "b.yaml"}, matches)
	data, err := fs.ReadFile(fsys, "a.yaml")
	require.NoError(t, err)
	assert.Equal(t, "a", string(data))
	err = within(t, "fs.ReadFile of a pipe", func() error { _, err := fs.ReadFile(fsys, "b.yaml"); return err })
	assert.EqualError(t, err, filepath.Join(dir, "b.yaml")+" is a named pipe (FIFO), not a regular file: only regular files are read or written")
	err = within(t, "fs.Stat of a pipe", func() error { _, err := fs.Stat(fsys, "b.yaml"); return err })
	assert.ErrorIs(t, err, ErrNotRegular)
	_, err = fsys.Open("../a.yaml")
	assert.ErrorIs(t, err, fs.ErrInvalid)
}

// Create writes a regular file, new or old, and refuses a pipe (whose
// open for writing waits for a reader) or a folder.
func TestCreateWritesRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "junit.xml")
	for range 2 {
		f, err := Create(name)
		require.NoError(t, err)
		_, err = f.WriteString("<x/>")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, "<x/>", string(data), "truncated, not appended")

	fifo := filepath.Join(dir, "fifo.xml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	err = within(t, "Create of a pipe", func() error { _, err := Create(fifo); return err })
	assert.EqualError(t, err, fifo+" is a named pipe (FIFO), not a regular file: only regular files are read or written")
	_, err = Create(dir)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorIs(t, within(t, "Writable of a pipe", func() error { return Writable(fifo) }), ErrNotRegular)

	// Writable leaves a file as it is, and makes one that is not there.
	require.NoError(t, Writable(name))
	data, err = os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, "<x/>", string(data))
	require.NoError(t, Writable(filepath.Join(dir, "new.xml")))
	assert.FileExists(t, filepath.Join(dir, "new.xml"))
}
