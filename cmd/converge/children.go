package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// children are the processes a command has started and not yet waited
// for, each in a process group of its own with what it was doing, so
// that an interrupted command can end them and say what it abandoned.
type children struct {
	mu      sync.Mutex
	running map[*exec.Cmd]*child
	// held are what the command set up outside its children (a kwok
	// cluster) and takes down itself when it ends: left behind if it is
	// abandoned.
	held map[*string]struct{}
	// killed is set once the command is abandoned: a child started after
	// that is killed at once.
	killed bool
}

type childrenKey struct{}

// withChildren is ctx whose commands register the processes they start
// with c.
func withChildren(ctx context.Context, c *children) context.Context {
	return context.WithValue(ctx, childrenKey{}, c)
}

// child is a process a command starts: exec.Cmd with Start, Wait and Run
// that keep it in a process group of its own, known to the command's
// children while it runs.
type child struct {
	*exec.Cmd
	what string
	of   *children
	// group: the child leads a process group of its own, and signals go
	// to the group.
	group bool
}

// newChild is exec.CommandContext for a child doing what (said when it is
// abandoned). When ctx ends the child's whole group gets SIGTERM, so
// whatever the child started ends with it; Kill ends the group at once.
func newChild(ctx context.Context, what, name string, args ...string) *child {
	cmd := exec.CommandContext(ctx, name, args...)
	of, _ := ctx.Value(childrenKey{}).(*children)
	c := &child{Cmd: cmd, what: what, of: of, group: true}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return c.signal(syscall.SIGTERM) }
	return c
}

// inForeground keeps the child in converge's process group, where a
// terminal's job control reaches it: for a command the user runs, which
// may read the terminal. Signals then go to the child alone.
func (c *child) inForeground() *child {
	c.group = false
	c.SysProcAttr = nil
	return c
}

// signal sends sig to the child's group, or to the child alone.
func (c *child) signal(sig syscall.Signal) error {
	if c.group {
		return syscall.Kill(-c.Process.Pid, sig)
	}
	return c.Process.Signal(sig)
}

func (c *child) Start() error {
	if err := c.Cmd.Start(); err != nil {
		return err
	}
	if c.of != nil {
		c.of.add(c)
	}
	return nil
}

func (c *child) Wait() error {
	err := c.Cmd.Wait()
	if c.of != nil {
		c.of.remove(c.Cmd)
	}
	return err
}

func (c *child) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

func (c *children) add(ch *child) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		_ = ch.signal(syscall.SIGKILL)
		return
	}
	if c.running == nil {
		c.running = map[*exec.Cmd]*child{}
	}
	c.running[ch.Cmd] = ch
}

func (c *children) remove(cmd *exec.Cmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, cmd)
}

// kill ends every running child's process group with SIGKILL, and any
// started later, and says what each was doing.
func (c *children) kill() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killed = true
	var out []string
	for _, ch := range c.running {
		how := "killed"
		if ch.group {
			how = "killed with its process group"
		}
		if err := ch.signal(syscall.SIGKILL); err != nil {
			how = fmt.Sprintf("not killed: %v", err)
		}
		out = append(out, fmt.Sprintf("%s (pid %d, %s)", ch.what, ch.Process.Pid, how))
	}
	for what := range c.held {
		out = append(out, *what+" (left running)")
	}
	slices.Sort(out)
	return out
}

// hold notes what the command keeps running outside its children until
// release is called, so that, if the command is abandoned meanwhile, it is
// named as left behind. ctx without children holds nothing.
func hold(ctx context.Context, what string) (release func()) {
	c, _ := ctx.Value(childrenKey{}).(*children)
	if c == nil {
		return func() {}
	}
	key := &what
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[*string]struct{}{}
	}
	c.held[key] = struct{}{}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.held, key)
	}
}

// abandoned is the line an abandoned command prints: what it was doing.
func abandoned(killed []string) string {
	if len(killed) == 0 {
		return "interrupted: abandoned the command (no child process was running)"
	}
	return "interrupted: abandoned " + strings.Join(killed, "; abandoned ")
}
