package envtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/converge-lab/converge/internal/spawn"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/sim"
)

// The supervisor's bounds: how often a component that exited is started
// again before the plane gives up on it, and how long each start may take
// to serve.
const (
	restartAttempts = 3
	restartReady    = 30 * time.Second
	// tailLines of a component's log go into what an outage says.
	tailLines = 20
)

// component is one process of the control plane, watched: an exit nothing
// asked for is an outage, and the process is started again with the
// command line it had.
type component struct {
	cp   *ControlPlane
	name string
	log  string // the path of its log, appended to by every start
	// ready returns nil once the process serves.
	ready func(ctx context.Context) error

	mu   sync.Mutex
	args []string // the binary and its flags
	cur  *running
	// stopping: its end was asked for (a restart, Stop), not an outage.
	stopping bool
	// recovering: the supervisor is starting it again; an exit now fails
	// that start rather than being an outage of its own.
	recovering bool
}

// running is one process of a component.
type running struct {
	pid  int
	done chan struct{} // closed once it has exited
	exit string        // how, once done is closed
	// adopted: started and reaped by envtest, which also stops it.
	adopted bool
}

// adopt watches a process another starter started (controller-runtime's
// envtest) and reaps: its exit is peeked at without reaping it.
func (c *component) adopt(pid int, args []string) {
	r := &running{pid: pid, done: make(chan struct{}), adopted: true}
	c.mu.Lock()
	c.args, c.cur = args, r
	c.mu.Unlock()
	go func() { c.exited(r, peekExit(pid)) }()
}

// start starts the component's command line anew, its output appended to
// its log, in a process group of its own, dying with this process.
func (c *component) start() error {
	c.mu.Lock()
	args := c.args
	c.mu.Unlock()
	log, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // the child holds its own copy
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn.Start(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	r := &running{pid: cmd.Process.Pid, done: make(chan struct{})}
	c.mu.Lock()
	c.cur, c.stopping = r, false
	c.mu.Unlock()
	go func() {
		_ = cmd.Wait() // how it ended is in ProcessState
		c.exited(r, cmd.ProcessState.String())
	}()
	return nil
}

// exited records how r ended and, when nothing asked for it, reports the
// outage to the plane.
func (c *component) exited(r *running, exit string) {
	r.exit = exit
	close(r.done)
	c.mu.Lock()
	unasked := c.cur == r && !c.stopping && !c.recovering
	c.mu.Unlock()
	if unasked {
		c.cp.outage(c, exit)
	}
}

// signal sends sig to the current process's group, unless it has exited.
func (r *running) signal(sig syscall.Signal) {
	select {
	case <-r.done:
	default:
		_ = syscall.Kill(-r.pid, sig)
	}
}

// release marks the current process's end as asked for, and reports
// whether it is one envtest started and stops itself.
func (c *component) release() (adopted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	return c.cur != nil && c.cur.adopted
}

// stop ends the current process, as asked for: SIGTERM, then SIGKILL past
// grace.
func (c *component) stop(grace time.Duration) error {
	c.mu.Lock()
	c.stopping = true
	r := c.cur
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	r.signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(grace):
	}
	r.signal(syscall.SIGKILL)
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", c.name, r.pid)
	}
}

// awaitReady polls ready until it answers, the process exits, or
// restartReady passes.
func (c *component) awaitReady(ctx context.Context) error {
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, restartReady)
	defer cancel()
	// A probe in progress ends when the process does.
	ctx, exited := context.WithCancelCause(ctx)
	defer exited(nil)
	go func() {
		select {
		case <-r.done:
			exited(fmt.Errorf("it exited again (%s)", r.exit))
		case <-ctx.Done():
		}
	}()
	for {
		err := c.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
				return cause
			}
			return fmt.Errorf("not serving after %v: %w", restartReady, err)
		case <-time.After(100 * time.Millisecond): // polling another process
		}
	}
}

// pid is the current process's pid (0 before it started).
func (c *component) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return 0
	}
	return c.cur.pid
}

// outage records c's unasked exit and starts it again in the background.
func (cp *ControlPlane) outage(c *component, exit string) {
	o := sim.Outage{Component: c.name, At: time.Now(), Exit: exit, Log: c.log, Tail: tail(c.log, tailLines)}
	cp.smu.Lock()
	if cp.stopping {
		cp.smu.Unlock()
		return
	}
	i := len(cp.outages)
	cp.outages = append(cp.outages, o)
	cp.down++
	cp.ready = false
	cp.changedLocked()
	cp.smu.Unlock()
	go cp.recover(c, i)
}

// recover starts c again, up to restartAttempts times, and waits for it
// to serve and for the plane to be ready; past the attempts the plane is
// broken, and every run on it fails at once.
func (cp *ControlPlane) recover(c *component, i int) {
	cp.restartMu.Lock()
	defer cp.restartMu.Unlock()
	c.mu.Lock()
	c.recovering = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.recovering = false
		c.mu.Unlock()
	}()
	ctx := context.Background()
	var err error
	for range restartAttempts {
		if cp.isStopping() {
			return
		}
		if err = c.start(); err == nil {
			if cp.isStopping() { // Stop may have missed what just started
				_ = c.stop(5 * time.Second)
				return
			}
			if err = c.awaitReady(ctx); err == nil {
				break
			}
		}
	}
	if err != nil {
		o := cp.outageAt(i)
		cp.breakDown(fmt.Errorf("the control plane's %s exited (%s) and could not be started again (%d attempts: %v); the last lines of its log:\n%s\n(its whole log: %s)",
			c.name, o.Exit, restartAttempts, err, text.Indent(tail(c.log, tailLines), "    "), c.log))
		return
	}
	cp.smu.Lock()
	cp.outages[i].Restarted = time.Now()
	cp.down--
	cp.changedLocked()
	cp.smu.Unlock()
	if err := cp.settle(ctx); err != nil {
		cp.breakDown(fmt.Errorf("the control plane is not ready after %s was restarted: %w", c.name, err))
	}
}

// settle waits until the API server answers and kube-controller-manager
// runs its controllers (probe), then marks the plane ready, unless a
// component is down meanwhile.
func (cp *ControlPlane) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, restartReady)
	defer cancel()
	for _, c := range []*component{cp.apiserver, cp.kcm} {
		if err := c.awaitReady(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	cp.smu.Lock()
	if cp.down == 0 && cp.err == nil {
		cp.ready = true
		cp.changedLocked()
	}
	cp.smu.Unlock()
	return nil
}

// unready marks the plane not ready, until the next settle.
func (cp *ControlPlane) unready() {
	cp.smu.Lock()
	cp.ready = false
	cp.changedLocked()
	cp.smu.Unlock()
}

// breakDown makes err the plane's: every run on it fails at once.
func (cp *ControlPlane) breakDown(err error) {
	cp.smu.Lock()
	if cp.err == nil && !cp.stopping {
		cp.err = err
		cp.broken(err)
		cp.changedLocked()
	}
	cp.smu.Unlock()
}

// changedLocked wakes whoever waits for the plane's state to change.
func (cp *ControlPlane) changedLocked() {
	close(cp.changed)
	cp.changed = make(chan struct{})
}

func (cp *ControlPlane) isStopping() bool {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	return cp.stopping
}

func (cp *ControlPlane) outageAt(i int) sim.Outage {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	return cp.outages[i]
}

// Outages are the components' exits nothing asked for, oldest first, and
// a channel closed at the plane's next change (see sim.Supervised).
func (cp *ControlPlane) Outages() ([]sim.Outage, <-chan struct{}) {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	return append([]sim.Outage(nil), cp.outages...), cp.changed
}

// Err is why the plane cannot serve runs: a component that exited and
// could not be started again. Nil while it can.
func (cp *ControlPlane) Err() error {
	cp.smu.Lock()
	defer cp.smu.Unlock()
	return cp.err
}

// WaitReady returns once every component runs and kube-controller-manager
// has been seen running its controllers since the last restart of any of
// them; or at once with the plane's error, if it has one; or when ctx
// ends.
func (cp *ControlPlane) WaitReady(ctx context.Context) error {
	for {
		cp.smu.Lock()
		err, ready, changed := cp.err, cp.ready, cp.changed
		cp.smu.Unlock()
		if err != nil {
			return err
		}
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("envtest: waiting for the control plane to be ready: %w", context.Cause(ctx))
		}
	}
}

// peekExit waits for pid, a child of this process that another waiter
// reaps (envtest's), to exit, and says how: from the zombie (waitid with
// WNOWAIT), or once it is reaped, from its pidfd (Linux 6.15 and later).
func peekExit(pid int) string {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return "exited; how is unknown: " + err.Error()
	}
	defer unix.Close(fd)
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && info.Signo != 0 {
			return childExit(&info)
		}
		break
	}
	pi := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	if err := unix.IoctlPidfdInfo(fd, &pi); err == nil && pi.Mask&unix.PIDFD_INFO_EXIT != 0 {
		return waitStatus(syscall.WaitStatus(pi.Exit_code))
	}
	return "exited; how is unknown (reaped before it could be read)"
}

// childExit says how a child ended, from waitid's siginfo_t.
func childExit(info *unix.Siginfo) string {
	// For SIGCHLD: si_pid, si_uid, then si_status, after the three ints
	// and the padding Siginfo names.
	raw := (*[unsafe.Sizeof(*info)]byte)(unsafe.Pointer(info))
	status := int(int32(binary.NativeEndian.Uint32(raw[24:28])))
	// si_code: CLD_EXITED (1), CLD_KILLED (2), CLD_DUMPED (3).
	switch info.Code {
	case 1:
		return fmt.Sprintf("exit status %d", status)
	case 2, 3:
		return "signal: " + syscall.Signal(status).String()
	}
	return fmt.Sprintf("exited (code %d, status %d)", info.Code, status)
}

// waitStatus says how a process ended, as os.ProcessState does.
func waitStatus(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// tail is the last n lines of the file at path, or why they could not be
// read.
func tail(path string, n int) string {
	lines, err := text.LastLines(path, n)
	if err != nil {
		return err.Error()
	}
	return strings.TrimRight(string(lines), "\n")
}

// Logs are the paths of the components' logs, by component.
func (cp *ControlPlane) Logs() map[string]string {
	out := map[string]string{}
	for _, c := range cp.components() {
		out[c.name] = c.log
	}
	return out
}

// LogTails are the last n lines of each component's log, with the path of
// the whole, for a failure message.
func (cp *ControlPlane) LogTails(n int) string {
	var b strings.Builder
	for _, c := range cp.components() {
		fmt.Fprintf(&b, "%s (%s):\n%s\n", c.name, c.log, text.Indent(tail(c.log, n), "    "))
	}
	return b.String()
}

// KeepLogs copies the components' logs into dir (a test's artifact
// folder), which outlives the plane's scratch folder.
func (cp *ControlPlane) KeepLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, c := range cp.components() {
		raw, err := os.ReadFile(c.log)
		if err != nil {
			if !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, filepath.Base(c.log)), raw, 0o644))
	}
	return errors.Join(errs...)
}

func (cp *ControlPlane) components() []*component {
	var out []*component
	for _, c := range []*component{cp.etcd, cp.apiserver, cp.kcm} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
