// Package proc stops the control-plane processes the harness restarts by
// pid: processes it did not start itself in this process, so it cannot
// wait on them, only watch /proc.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killWait bounds the wait for a process to go after SIGKILL.
const killWait = 10 * time.Second

// Stop sends pid SIGTERM and waits for it to exit; past grace it sends
// SIGKILL (a crash, then) and waits again. A process already gone is
// stopped.
func Stop(ctx context.Context, pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("stopping process %d: %w", pid, err)
	}
	if Gone(ctx, pid, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if Gone(ctx, pid, killWait) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("process %d still running: %w", pid, ctx.Err())
	}
	return fmt.Errorf("process %d still running %v after SIGKILL", pid, killWait)
}

// Gone polls until pid has exited (a zombie its parent has not reaped yet
// counts as exited), for at most limit or until ctx ends, and reports
// whether it did.
func Gone(ctx context.Context, pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true
		}
		// The state follows the command name in parentheses: "pid (comm) Z ...".
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling another process's exit
	}
}
