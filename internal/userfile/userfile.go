// Package userfile reads and writes the files a user names (a scenario,
// the object files it names, a result, a kubeconfig, a JUnit file) so that
// no name, however chosen, hangs the caller: only regular files are read
// or written, and a named pipe, a device, a socket or a folder is refused,
// by name and kind, before anything could block on it.
//
// A file is checked (stat, links followed) before it is opened, so a device
// is never opened at all; it is then opened without blocking (O_NONBLOCK)
// and checked again on the open file, so a regular file swapped for a pipe
// in between is refused too.
//
// It cannot bound a read that blocks inside the kernel on a regular file
// (a hung network file system); a caller that must not wait for ever
// needs a deadline of its own.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is what NotRegularError matches with errors.Is.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError is a named file that is not a regular file.
type NotRegularError struct {
	Name string
	// Kind is what it is instead: "a named pipe (FIFO)", "a folder"...
	Kind string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: only regular files are read or written", e.Name, e.Kind)
}

func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// kind names what a file of mode m is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file (" + m.Type().String() + ")"
}

// Check says whether name is a regular file (links followed), without
// opening it: for a file another program will read.
func Check(name string) error {
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	return Regular(name, st.Mode())
}

// Regular is a NotRegularError for the file name of mode m unless it is a
// regular file: for readers of an fs.FS other than FS, which can check
// only before they open.
func Regular(name string, m fs.FileMode) error {
	if !m.IsRegular() {
		return &NotRegularError{Name: name, Kind: kind(m)}
	}
	return nil
}

// Open opens name for reading if it is a regular file.
func Open(name string) (*os.File, error) {
	return open(name, false)
}

// open opens name for reading if it is a regular file, or, with dirs, a
// folder.
func open(name string, dirs bool) (*os.File, error) {
	allowed := func(m fs.FileMode) bool { return m.IsRegular() || (dirs && m.IsDir()) }
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !allowed(st.Mode()) {
		return nil, &NotRegularError{Name: name, Kind: kind(st.Mode())}
	}
	// O_NONBLOCK: an open of a pipe put there since the stat returns at
	// once; on a regular file or a folder the flag changes nothing.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err = f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !allowed(st.Mode()) {
		_ = f.Close()
		return nil, &NotRegularError{Name: name, Kind: kind(st.Mode())}
	}
	return f, nil
}

// Create creates or truncates name for writing if it is a regular file or
// not there yet: an open of a pipe for writing waits for a reader.
func Create(name string) (*os.File, error) {
	return openWrite(name, os.O_TRUNC)
}

// Writable says whether name can be written as Create would, creating it
// empty when it is not there and leaving it as it is otherwise: to find a
// bad output path before the work that writes it.
func Writable(name string) error {
	f, err := openWrite(name, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// openWrite opens name for writing with flag, as Create says.
func openWrite(name string, flag int) (*os.File, error) {
	st, err := os.Stat(name)
	if err == nil {
		if err := Regular(name, st.Mode()); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// O_NONBLOCK: an open of a pipe put there since the stat fails at once
	// (no reader) rather than waiting for one.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err == nil {
		err = Regular(name, st.Mode())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// TooLargeError is a file larger than its reader reads.
type TooLargeError struct {
	Name string
	Max  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes, the most read of it", e.Name, e.Max)
}

// ReadFile reads the regular file name whole, refusing it when it holds
// more than max bytes (max <= 0: no bound).
func ReadFile(name string, max int64) ([]byte, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, name, max)
}

func readAll(r io.Reader, name string, max int64) ([]byte, error) {
	if max <= 0 {
		return io.ReadAll(r)
	}
	// One byte past the bound is enough to refuse it.
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Name: name, Max: max}
	}
	return data, nil
}

// FS is the operating system's files under the folder it names, as an
// fs.FS whose Open opens regular files as Open does and folders (for
// fs.ReadDir and fs.Glob), and refuses anything else: a reader of a
// user's files through it never blocks on a pipe or a device.
type FS string

var _ fs.FS = FS("/")

// DisplayName is the path on disk of name, a path of the file system: how
// its user names it.
func (root FS) DisplayName(name string) string {
	return filepath.Join(string(root), filepath.FromSlash(name))
}

// Open opens the file name of the file system, a slash-separated path
// relative to its root (fs.ValidPath).
func (root FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := open(filepath.Join(string(root), filepath.FromSlash(path.Clean(name))), true)
	if err != nil {
		// Nil as an interface, not a nil *os.File.
		return nil, err
	}
	return f, nil
}
