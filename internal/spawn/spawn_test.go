package spawn

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo is a child that answers one line with the same line, started with
// SIGKILL as its parent-death signal.
type echo struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	exited chan error
}

// startFromDyingThread starts an echo from a goroutine that locks its
// thread and returns without unlocking it, so that Go ends the thread, and
// returns once the thread is gone: if the child was to get its
// parent-death signal, it has been sent.
func startFromDyingThread(t *testing.T, start func(*exec.Cmd) error) *echo {
	t.Helper()
	e := &echo{cmd: exec.Command("sh", "-c", "read line && echo \"$line\""), exited: make(chan error, 1)}
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	e.in, err = e.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := e.cmd.StdoutPipe()
	require.NoError(t, err)
	e.out = bufio.NewReader(out)
	// Go never ends the process's main thread (it parks it instead), so
	// the goroutine must be on another.
	var tid int
	for {
		tids := make(chan int)
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			tid := syscall.Gettid()
			tids <- tid
			if tid != os.Getpid() {
				errs <- start(e.cmd)
			}
		}()
		if tid = <-tids; tid != os.Getpid() {
			require.NoError(t, <-errs)
			break
		}
	}
	t.Cleanup(func() { _ = e.cmd.Process.Kill() })
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	require.Eventually(t, func() bool { _, err := os.Stat(task); return os.IsNotExist(err) }, 10*time.Second, 10*time.Millisecond,
		"the goroutine's thread ended")
	return e
}

// answers reports whether the child echoes a line, then reaps it.
func (e *echo) answers(t *testing.T) (bool, error) {
	t.Helper()
	_, _ = io.WriteString(e.in, "ping\n")
	line, _ := e.out.ReadString('\n')
	return line == "ping\n", e.cmd.Wait()
}

// The failure this package exists for: a child forked from a thread that
// ends is killed with the thread, while the process that started it lives.
func TestAChildOfAnEndedThreadIsKilled(t *testing.T) {
	e := startFromDyingThread(t, (*exec.Cmd).Start)
	answered, err := e.answers(t)
	assert.False(t, answered, "the child outlived the thread that forked it")
	assert.EqualError(t, err, "signal: killed")
}

// Started through Start, the same child outlives the thread of the
// goroutine that asked for it.
func TestAChildOfTheSpawnerOutlivesItsCaller(t *testing.T) {
	e := startFromDyingThread(t, Start)
	answered, err := e.answers(t)
	assert.True(t, answered, "the child was killed with its caller's thread")
	assert.NoError(t, err)
}

func TestDoReturnsTheError(t *testing.T) {
	assert.EqualError(t, Do(func() error { return fmt.Errorf("no") }), "no")
	assert.Error(t, Start(exec.Command("/nonexistent/binary")))
}
