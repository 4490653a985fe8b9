package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// asCLI makes this test binary the converge command (TestMain).
const asCLI = "CONVERGE_TEST_AS_CLI"

// stuckTests writes a stand-in for compiled scenario tests: it lists one
// scenario, stuck, and a run of it never ends: it starts a child of its
// own that sleeps, writes that child's pid to ready, and waits for it;
// both ignore SIGTERM when ignoreTerm (so only SIGKILL ends them). The
// child holds the run's output open: killing the stand-in alone would
// leave converge waiting for the output to end.
func stuckTests(t *testing.T, ignoreTerm bool) (bin, ready string) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh for the stand-in tests")
	}
	dir := t.TempDir()
	ready = filepath.Join(dir, "ready")
	trap := ""
	if ignoreTerm {
		trap = "trap '' TERM INT\n"
	}
	script := "#!/bin/sh\n" +
		"case \" $* \" in\n" +
		"*\" -test.v \"*)\n" + trap +
		"  sleep 3600 &\n" +
		"  echo $! > " + ready + ".tmp && mv " + ready + ".tmp " + ready + "\n" +
		"  wait ;;\n" +
		"*) echo '" + scenariotest.ListPrefix + `{"test":"TestScenarios","name":"stuck","backends":["fake"]}'` + " ;;\n" +
		"esac\n"
	bin = filepath.Join(dir, "stuck.test")
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, ready
}

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliProcess is a converge process started by a test.
type cliProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{}
	err            error
	// sent is when the last signal was sent, ended when converge exited.
	sent, ended time.Time
}

// startCLI starts converge (this binary as the CLI) with args and the
// grace, and its own cache.
func startCLI(t *testing.T, grace time.Duration, args ...string) *cliProcess {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	p := &cliProcess{stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(self, args...)
	p.cmd.Env = append(os.Environ(), asCLI+"=1", graceEnv+"="+grace.String(), "XDG_CACHE_HOME="+t.TempDir())
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		p.ended = time.Now()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitFor polls until cond holds, failing t after the deadline.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, deadline, 20*time.Millisecond, what)
}

// stubPid waits for the stand-in tests to run and returns the pid of their
// child.
func stubPid(t *testing.T, p *cliProcess, ready string) int {
	t.Helper()
	var pid int
	waitFor(t, "the stuck run to start", 30*time.Second, func() bool {
		select {
		case <-p.exited:
			t.Fatalf("converge exited before the run started: %v\n%s%s", p.err, p.stdout, p.stderr)
		default:
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	return pid
}

// signal sends sig to converge and notes when.
func (p *cliProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.sent = time.Now()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// exitWithin waits for converge to exit, failing t after limit, and
// returns how long after the last signal it exited and its exit status.
func (p *cliProcess) exitWithin(t *testing.T, limit time.Duration) (time.Duration, int) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(limit):
		t.Fatalf("converge still runs %v after the signal\nstdout:\n%s\nstderr:\n%s", limit, p.stdout, p.stderr)
	}
	took := p.ended.Sub(p.sent)
	var exit *exec.ExitError
	if p.err == nil {
		return took, 0
	}
	require.True(t, errors.As(p.err, &exit), "%v", p.err)
	return took, exit.ExitCode()
}

// gone says whether the process pid has ended (a zombie no one reaps has
// ended too).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces, the state follows its ")".
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// abandonedPid checks that stderr says, after prefix, that the stuck run
// was abandoned and its group killed, and returns the pid it names.
func abandonedPid(t *testing.T, stderr, prefix string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + `interrupted: abandoned the run of stuck on fake, seed 1 \(pid (\d+), killed with its process group\)\n`).FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return pid
}

// A first SIGTERM ends a run whose tests obey it: converge stops them,
// writes its summary (the run without a result) and exits non-zero well
// before the grace.
func TestFirstSignalWindsDown(t *testing.T) {
	bin, ready := stuckTests(t, false)
	p := startCLI(t, time.Minute, "run", "stuck", "--test-binary", bin, "--report", t.TempDir())
	pid := stubPid(t, p, ready)
	p.signal(t, syscall.SIGTERM)
	took, code := p.exitWithin(t, 30*time.Second)
	assert.Less(t, took, 20*time.Second, "ended by the wind-down, not the grace of a minute")
	assert.Equal(t, 1, code, "%s%s", p.stdout, p.stderr)
	assert.Contains(t, p.stderr.String(), "converge: terminated: stopping; exiting at once after 1m0s or on a second signal")
	assert.Contains(t, p.stdout.String(), "NO RESULT stuck/fake/seed-1")
	assert.NotContains(t, p.stderr.String(), "abandoned")
	waitFor(t, "the stuck run's process to end", 10*time.Second, func() bool { return gone(pid) })
}

// A run whose tests ignore SIGTERM is abandoned when the grace runs out:
// converge kills their process group, says what it abandoned, and exits
// with 128+15.
func TestGraceRunningOutAbandons(t *testing.T) {
	bin, ready := stuckTests(t, true)
	grace := 2 * time.Second
	p := startCLI(t, grace, "run", "stuck", "--test-binary", bin, "--report", t.TempDir())
	pid := stubPid(t, p, ready)
	p.signal(t, syscall.SIGTERM)
	took, code := p.exitWithin(t, grace+20*time.Second)
	assert.GreaterOrEqual(t, took, grace, "the grace is given")
	assert.Equal(t, 128+int(syscall.SIGTERM), code, "%s%s", p.stdout, p.stderr)
	leader := abandonedPid(t, p.stderr.String(), "converge: still running 2s after terminated: ")
	waitFor(t, "the stuck run's processes to end", 10*time.Second, func() bool { return gone(pid) && gone(leader) })
}

// A second signal exits at once, however long the grace: what runs is
// killed and named.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	bin, ready := stuckTests(t, true)
	p := startCLI(t, time.Hour, "run", "stuck", "--test-binary", bin, "--report", t.TempDir())
	pid := stubPid(t, p, ready)
	p.signal(t, syscall.SIGTERM)
	waitFor(t, "converge to say it is stopping", 10*time.Second, func() bool { return strings.Contains(p.stderr.String(), "stopping") })
	p.signal(t, syscall.SIGINT)
	took, code := p.exitWithin(t, 20*time.Second)
	assert.Less(t, took, 10*time.Second)
	assert.Equal(t, 128+int(syscall.SIGTERM), code, "the first signal's status")
	leader := abandonedPid(t, p.stderr.String(), "converge: interrupt again: ")
	waitFor(t, "the stuck run's processes to end", 10*time.Second, func() bool { return gone(pid) && gone(leader) })
}

// A grace that is not a positive duration is a usage error, before any
// command runs.
func TestGraceMustBeADuration(t *testing.T) {
	for _, bad := range []string{"10", "soon", "-1s", "0s"} {
		t.Setenv(graceEnv, bad)
		var stderr bytes.Buffer
		assert.Equal(t, 2, runMain([]string{"list", "--test-binary", "/nonexistent"}, &bytes.Buffer{}, &stderr), bad)
		assert.Contains(t, stderr.String(), "$CONVERGE_GRACE=", bad)
	}
}

// Abandoning names each child with its pid and what the command left
// running, kills the children, and kills at once a child started after.
func TestAbandonKillsAndNames(t *testing.T) {
	c := &children{}
	ctx := withChildren(context.Background(), c)
	release := hold(ctx, "the kwok cluster k")
	hold(ctx, "the kwok cluster deleted already")()
	sleeper := newChild(ctx, "a sleeper", "sleep", "600")
	require.NoError(t, sleeper.Start())
	ended := func(ch *child) error {
		done := make(chan error, 1)
		go func() { done <- ch.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still runs", ch.what)
			return nil
		}
	}
	got := c.kill()
	assert.Equal(t, []string{
		"a sleeper (pid " + strconv.Itoa(sleeper.Process.Pid) + ", killed with its process group)",
		"the kwok cluster k (left running)",
	}, got)
	assert.EqualError(t, ended(sleeper), "signal: killed")
	late := newChild(ctx, "a late sleeper", "sleep", "600")
	require.NoError(t, late.Start())
	assert.EqualError(t, ended(late), "signal: killed")
	release()
	assert.Equal(t, "interrupted: abandoned the command (no child process was running)", abandoned(c.kill()))
}
