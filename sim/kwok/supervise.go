package kwok

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/sim"
)

// The supervisor's bounds: how often it looks at the components, how
// often a component that exited is started again before the cluster gives
// up on it, how long a start has to serve (the API server) or to stay up
// (the others, which serve nothing a run reads directly), and how much of
// a log an outage quotes.
const (
	supervisePoll   = time.Second
	restartAttempts = 3
	restartReady    = 30 * time.Second
	stayUp          = 3 * time.Second
	tailLines       = 20
)

var _ sim.Supervised = (*Cluster)(nil)

// live holds the clusters this process started and has not stopped, so
// that StopAll ends their supervisors before it kills their processes.
var live clusters

type clusters struct {
	mu sync.Mutex
	m  map[*Cluster]struct{}
}

func (l *clusters) add(c *Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[*Cluster]struct{}{}
	}
	l.m[c] = struct{}{}
}

func (l *clusters) remove(c *Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, c)
}

// take empties the set and returns what it held.
func (l *clusters) take() []*Cluster {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Collect(maps.Keys(l.m))
	clear(l.m)
	return out
}

// supervise watches the cluster's components until ctx ends: one whose
// process is gone when nothing asked for it (a restart holds c.mu, Stop
// ends the watch first) is an outage, and is started again with the
// arguments kwokctl gave it. done is closed when it returns.
func (c *Cluster) supervise(ctx context.Context, names []string, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(supervisePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, name := range names {
			if !c.mu.TryLock() {
				break // a restart or Stop is under way: look again later
			}
			gone := !c.stopped && !c.running(name)
			c.mu.Unlock()
			if gone && ctx.Err() == nil {
				c.recover(ctx, name)
			}
		}
	}
}

// recover records name's outage and starts it again, up to
// restartAttempts times; past them the cluster is broken, and every run on
// it fails at once.
func (c *Cluster) recover(ctx context.Context, name string) {
	log := c.logPath(name)
	o := sim.Outage{Component: name, At: time.Now(), Exit: "its process is gone", Log: log, Tail: tailOf(log, tailLines)}
	c.smu.Lock()
	i := len(c.outages)
	c.outages = append(c.outages, o)
	c.changedLocked()
	c.smu.Unlock()
	klog.Background().Info("kwok: a component exited; starting it again", "kwokCluster", c.name, "component", name)
	var err error
	for range restartAttempts {
		if err = c.restart(ctx, name, 0); err == nil {
			if err = c.awaitUp(ctx, name); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			return // stopping
		}
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("the kwok cluster's %s exited and could not be started again (%d attempts: %v); the last lines of its log:\n%s\n(its whole log: %s)",
				name, restartAttempts, err, text.Indent(tailOf(log, tailLines), "    "), log)
		}
	} else {
		c.outages[i].Restarted = time.Now()
	}
	c.changedLocked()
}

// awaitUp waits for a started component to serve: the API server until it
// answers, any other until it has stayed up for stayUp.
func (c *Cluster) awaitUp(ctx context.Context, name string) error {
	if name == "kube-apiserver" {
		return c.waitServed(ctx, restartReady)
	}
	t := time.NewTimer(stayUp)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running(name) {
		return fmt.Errorf("%s exited again within %v", name, stayUp)
	}
	return nil
}

// Outages are the components' exits nothing asked for since the cluster
// started, oldest first, and a channel closed at the next change (see
// sim.Supervised).
func (c *Cluster) Outages() ([]sim.Outage, <-chan struct{}) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return append([]sim.Outage(nil), c.outages...), c.changed
}

// Err is why the cluster cannot serve runs: a component that exited and
// could not be started again. Nil while it can.
func (c *Cluster) Err() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.err
}

// changedLocked wakes whoever waits for the cluster's state to change.
func (c *Cluster) changedLocked() {
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}

// stopSupervising ends the watch and waits for it, so that what Stop ends
// is not an outage.
func (c *Cluster) stopSupervising() {
	if c.unwatch != nil {
		c.unwatch()
		<-c.watching
	}
}

// componentNames are the names of the cluster's processes, as kwok.yaml
// lists them (kwokctl names their binaries, pid files and logs so too).
func componentNames(file string) ([]string, error) {
	comps, err := readComponents(file)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range comps {
		if c.Binary != "" && c.WorkDir != "" {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("kwok: %s names no component", file)
	}
	return names, nil
}

// ofCluster says whether pid is a process of the cluster in workdir: its
// command line or environment names the folder.
func ofCluster(pid int, workdir string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	environ, _ := os.ReadFile(filepath.Join(dir, "environ"))
	return bytes.Contains(cmdline, []byte(workdir+"/")) ||
		bytes.Contains(append([]byte{0}, environ...), []byte("\x00KWOK_WORKDIR="+workdir+"\x00"))
}

// tailOf is the last n lines of the file at path, "" when it cannot be
// read.
func tailOf(path string, n int) string {
	lines, err := text.LastLines(path, n)
	if err != nil {
		return ""
	}
	return string(lines)
}
