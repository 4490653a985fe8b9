package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/converge-lab/converge/internal/spawn"
)

// ProcessConfig is a controller binary to run, typically with a kubeconfig
// that Proxy wrote.
type ProcessConfig struct {
	Path string
	Args []string
	// Env is added to the harness's own environment.
	Env            []string
	Stdout, Stderr io.Writer
	// Grace is how long Terminate waits after SIGTERM before it sends
	// SIGKILL; an exit later than Grace is recorded as such. Zero means 30s,
	// a Pod's default.
	Grace time.Duration
	// Recorder receives the exit, for the run's history. Nil discards it.
	Recorder Recorder
}

// Process is a running controller binary. Terminate and Kill are the real
// SIGTERM and SIGKILL; wire them to Plan.OnTerminate and Plan.OnCrash for
// the Terminate and Crash faults of the proxy the binary goes through.
type Process struct {
	cfg  ProcessConfig
	cmd  *exec.Cmd
	name string

	done chan struct{} // closed when the process has exited and exit is set
	exit Exit

	mu     sync.Mutex
	sent   string
	sentAt time.Time
	termAt time.Time // the first SIGTERM's
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, or -1 if a signal ended the process.
	Code int
	// Signal is the signal that ended it, if one did ("killed").
	Signal string
	// Sent is the signal the harness sent to end it ("SIGTERM", "SIGKILL"),
	// or empty if it ended on its own.
	Sent string
	// ShutdownTime runs from the first signal sent to the exit.
	ShutdownTime time.Duration
	// WithinGrace: the exit came no later than the grace after SIGTERM.
	WithinGrace bool
}

func (e Exit) String() string {
	var b strings.Builder
	if e.Signal != "" {
		fmt.Fprintf(&b, "ended by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "exited with status %d", e.Code)
	}
	if e.Sent != "" {
		fmt.Fprintf(&b, " %v after %s", e.ShutdownTime.Round(time.Millisecond), e.Sent)
		if e.Sent == "SIGTERM" && !e.WithinGrace {
			b.WriteString(", later than its grace")
		}
	}
	return b.String()
}

// StartProcess starts the binary. It dies with the harness (Pdeathsig), and
// only then, in its own process group.
func StartProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.Path == "" {
		return nil, errors.New("chaos: process: no binary")
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("chaos: process: negative grace %v", cfg.Grace)
	}
	if cfg.Grace == 0 {
		cfg.Grace = 30 * time.Second
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// From the spawner's thread: the death signal follows the harness's
	// process, not the thread of the goroutine that asked (package spawn).
	if err := spawn.Start(cmd); err != nil {
		return nil, fmt.Errorf("chaos: starting %s: %w", cfg.Path, err)
	}
	p := &Process{cfg: cfg, cmd: cmd, name: strings.Join(append([]string{cfg.Path}, cfg.Args...), " "), done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	_ = p.cmd.Wait() // how it ended is in ProcessState
	ended := time.Now()
	// Whatever the binary left in its group goes with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.mu.Lock()
	e := Exit{Code: p.cmd.ProcessState.ExitCode(), Sent: p.sent}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal().String()
	}
	if p.sent != "" {
		e.ShutdownTime = ended.Sub(p.sentAt)
		e.WithinGrace = e.ShutdownTime <= p.cfg.Grace && e.Signal == ""
	}
	p.exit = e
	p.mu.Unlock()
	if p.cfg.Recorder != nil {
		p.cfg.Recorder.Record(Firing{At: ended, Fault: "exit", Request: p.name, Outcome: e.String()})
	}
	close(p.done)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit waits for the process to exit and says how.
func (p *Process) Exit() Exit {
	<-p.done
	return p.exit
}

// Terminate sends SIGTERM, waits up to the grace, then sends SIGKILL, and
// returns how the process ended. A process already sent SIGTERM is not
// sent it again, as a kubelet does not: the grace runs from the first (a
// second SIGTERM reaches a binary that, shutting down, may have given the
// signal back to its default action, and kills it).
func (p *Process) Terminate() Exit {
	p.mu.Lock()
	first := p.termAt.IsZero()
	if first {
		p.termAt = time.Now()
	}
	deadline := p.termAt.Add(p.cfg.Grace)
	p.mu.Unlock()
	if first {
		p.signal("SIGTERM", syscall.SIGTERM)
	}
	grace := time.NewTimer(time.Until(deadline))
	defer grace.Stop()
	select {
	case <-p.done:
	case <-grace.C:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	return p.Exit()
}

// Kill sends SIGKILL, as a crash or an OOM kill does, and returns how the
// process ended.
func (p *Process) Kill() Exit {
	p.signal("SIGKILL", syscall.SIGKILL)
	return p.Exit()
}

func (p *Process) signal(name string, sig syscall.Signal) {
	p.mu.Lock()
	if p.sent == "" {
		p.sent, p.sentAt = name, time.Now()
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}
