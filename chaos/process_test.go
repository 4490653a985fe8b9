package chaos_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
)

// startShell runs script under /bin/sh and waits until it has set its
// traps (it creates the file ready).
func startShell(t *testing.T, script string, grace time.Duration, rec chaos.Recorder) *chaos.Process {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	p, err := chaos.StartProcess(chaos.ProcessConfig{Path: "/bin/sh", Args: []string{"-c", script + "; touch " + ready + "; while :; do sleep 0.01; done"}, Grace: grace, Recorder: rec})
	require.NoError(t, err)
	t.Cleanup(func() { p.Kill() })
	require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil }, 10*time.Second, 5*time.Millisecond)
	return p
}

func TestProcessTerminateRecordsTheExit(t *testing.T) {
	log := &chaos.Log{}
	p := startShell(t, `trap 'exit 3' TERM`, 10*time.Second, log)
	exit := p.Terminate()
	assert.Equal(t, 3, exit.Code)
	assert.Empty(t, exit.Signal)
	assert.Equal(t, "SIGTERM", exit.Sent)
	assert.True(t, exit.WithinGrace)
	require.Len(t, log.Firings(), 1)
	assert.Equal(t, "exit", log.Firings()[0].Fault)
	assert.Contains(t, log.Firings()[0].Outcome, "exited with status 3 ")
}

func TestProcessIgnoringSIGTERMIsKilledAfterItsGrace(t *testing.T) {
	p := startShell(t, `trap '' TERM`, 300*time.Millisecond, nil)
	exit := p.Terminate()
	assert.Equal(t, -1, exit.Code)
	assert.Equal(t, "killed", exit.Signal)
	assert.False(t, exit.WithinGrace)
	assert.GreaterOrEqual(t, exit.ShutdownTime, 300*time.Millisecond)
	assert.Contains(t, exit.String(), "ended by signal killed")
}

func TestProcessBadConfig(t *testing.T) {
	_, err := chaos.StartProcess(chaos.ProcessConfig{})
	assert.ErrorContains(t, err, "no binary")
	_, err = chaos.StartProcess(chaos.ProcessConfig{Path: "/nonexistent/controller"})
	assert.ErrorContains(t, err, "starting /nonexistent/controller")
	_, err = chaos.StartProcess(chaos.ProcessConfig{Path: "/bin/true", Grace: -time.Second})
	assert.ErrorContains(t, err, "negative grace")
}

// A process already shutting down after SIGTERM is not sent it again when
// it is terminated a second time (a terminate fault, then the run's end):
// a binary that has given SIGTERM back to its default action would die of
// it, which is the harness's doing, not an unclean shutdown of its own.
// The second Terminate waits out the first's grace.
func TestASecondTerminateSendsNoSecondSIGTERM(t *testing.T) {
	shutting := filepath.Join(t.TempDir(), "shutting")
	p := startShell(t, `trap 'trap - TERM; touch `+shutting+`; sleep 0.5; exit 0' TERM`, 10*time.Second, nil)
	first := make(chan chaos.Exit, 1)
	go func() { first <- p.Terminate() }()
	require.Eventually(t, func() bool { _, err := os.Stat(shutting); return err == nil }, 10*time.Second, 5*time.Millisecond)
	exit := p.Terminate()
	assert.Equal(t, 0, exit.Code, exit.String())
	assert.Empty(t, exit.Signal)
	assert.True(t, exit.WithinGrace)
	assert.Equal(t, exit, <-first)
}
