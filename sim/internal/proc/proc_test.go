package proc

import (
	"bufio"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// start runs a shell script as a child, waits for its first line of
// output (the script is ready) and reaps it in the background.
func start(t *testing.T, script string) (pid int, exited <-chan error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	_, err = bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd.Process.Pid, done
}

func TestStopTerminates(t *testing.T) {
	pid, exited := start(t, "echo ready; exec sleep 60")
	require.NoError(t, Stop(context.Background(), pid, 5*time.Second))
	err := <-exited
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, "signal: terminated", exit.Error())
}

// A process that ignores SIGTERM is killed once the grace has passed.
func TestStopKillsPastTheGrace(t *testing.T) {
	pid, exited := start(t, `trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	require.False(t, Gone(context.Background(), pid, 100*time.Millisecond), "the shell is running")
	require.NoError(t, Stop(context.Background(), pid, 200*time.Millisecond))
	err := <-exited
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, "signal: killed", exit.Error())
}

// An exited process not yet reaped (a zombie) is gone; it is reaped after
// Stop, so its pid cannot have gone to another process meanwhile.
func TestStopAProcessAlreadyGone(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.True(t, Gone(context.Background(), pid, 10*time.Second))
	assert.NoError(t, Stop(context.Background(), pid, time.Second))
	assert.NoError(t, cmd.Wait())
}
