// Package spawn starts child processes from one OS thread that lives as
// long as the process.
//
// On Linux a child's parent-death signal (SysProcAttr.Pdeathsig, or
// setpriv --pdeathsig) is sent when the *thread* that forked it ends, not
// when the process does (go.dev/issue/27505). Go ends a thread when a
// goroutine locked to it (runtime.LockOSThread) returns without unlocking,
// which any code in the process may do: a controller under test, a
// library it uses. A control-plane process forked from such a thread
// would be killed with it, silently, in the middle of a test. Forking from
// the spawner's thread, which is locked to a goroutine that never returns,
// ties the signal to the process's own end, as intended.
package spawn

import (
	"os/exec"
	"runtime"
	"sync"
)

type request struct {
	f    func() error
	done chan error
}

var (
	once     sync.Once
	requests chan request
)

// thread runs each request on the OS thread it is locked to, for ever.
func thread() {
	runtime.LockOSThread() // never unlocked: this thread ends with the process
	for r := range requests {
		r.done <- r.f()
	}
}

// Do runs f on the spawner's thread and returns its error: every process f
// starts (synchronously: a goroutine f starts runs elsewhere) has that
// thread as its parent. Calls are served one at a time.
func Do(f func() error) error {
	once.Do(func() {
		requests = make(chan request)
		go thread()
	})
	done := make(chan error, 1)
	requests <- request{f: f, done: done}
	return <-done
}

// Start is cmd.Start on the spawner's thread.
func Start(cmd *exec.Cmd) error { return Do(cmd.Start) }
