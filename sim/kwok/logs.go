package kwok

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/converge-lab/converge/internal/text"
)

// ComponentLog is the log file of one of a cluster's processes.
type ComponentLog struct {
	// Component is the process's name: etcd, kube-apiserver, kwok, ...
	Component string
	// Path is the whole log.
	Path string
}

// Logs are the cluster's component logs, by component name. They are
// deleted with the cluster: KeepLogs copies them.
func (c *Cluster) Logs() []ComponentLog {
	files, _ := filepath.Glob(filepath.Join(c.workdir, "clusters", c.name, "logs", "*.log"))
	var out []ComponentLog
	for _, f := range files { // sorted by Glob
		out = append(out, ComponentLog{Component: strings.TrimSuffix(filepath.Base(f), ".log"), Path: f})
	}
	return out
}

// KeepLogs copies the cluster's component logs into dir, which it creates,
// and returns the copies.
func (c *Cluster) KeepLogs(dir string) ([]ComponentLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	var kept []ComponentLog
	var errs []error
	for _, l := range c.Logs() {
		dst := filepath.Join(dir, filepath.Base(l.Path))
		if err := copyFile(dst, l.Path); err != nil {
			errs = append(errs, fmt.Errorf("kwok: keeping %s's log: %w", l.Component, err))
			continue
		}
		kept = append(kept, ComponentLog{Component: l.Component, Path: dst})
	}
	return kept, errors.Join(errs...)
}

// LogTail is the last n lines of each log, each headed by its component and
// the whole log's path: what a failure message shows of them.
func LogTail(logs []ComponentLog, n int) string {
	var b strings.Builder
	for _, l := range logs {
		fmt.Fprintf(&b, "--- %s, the last %d lines of %s:\n", l.Component, n, l.Path)
		lines, err := text.LastLines(l.Path, n)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		b.Write(lines)
	}
	return b.String()
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
