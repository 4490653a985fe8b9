// Package simtest holds the backends' test helpers: the envtest control
// plane and the kwokctl cluster a test binary shares (Main, Require,
// RequireKwok), which end a test loudly when their binaries are missing,
// and fail it under CI.
package simtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/kwok"
)

// BuildAsThisBinary makes the go commands a test binary starts (go build,
// go test -c, and converge's own builds of a user's tests) build the way
// this binary was built: with the race detector when it has it, through
// GOFLAGS, which they inherit. They then reuse the packages go test has
// just compiled rather than compile the tree once more without it (on a
// cold cache and 2 cores, some minutes). Call it from TestMain, before
// the tests run.
func BuildAsThisBinary() {
	flags := os.Getenv("GOFLAGS")
	if raceEnabled && !slices.Contains(strings.Fields(flags), "-race") {
		os.Setenv("GOFLAGS", strings.TrimSpace(flags+" -race"))
	}
}

// Main runs a test binary's tests and stops the shared control planes after
// them, and any kwokctl cluster a test left running: call it from TestMain
// as os.Exit(simtest.Main(m)). The go commands the tests start build as
// this binary was built (BuildAsThisBinary).
func Main(m *testing.M) int {
	BuildAsThisBinary()
	code := m.Run()
	for _, cp := range envtest.SharedPlanes() {
		outages, _ := cp.Outages()
		for _, o := range outages {
			fmt.Fprintf(os.Stderr, "envtest: the shared control plane's %s\n", o.Detail())
		}
	}
	if err := errors.Join(envtest.StopShared(), stopKwok(), cluster.StopShared(), kwok.StopAll()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

var sharedKwok struct {
	once    sync.Once
	cluster *kwok.Cluster
	err     error
}

// RequireKwok returns the kwokctl cluster the test binary shares, started
// on first use, or ends the test when its binaries are missing: a failure
// under CI (see kwok.Required), a loud skip elsewhere. Main deletes it.
func RequireKwok(t testing.TB) *kwok.Cluster {
	t.Helper()
	sharedKwok.once.Do(func() {
		sharedKwok.cluster, sharedKwok.err = kwok.Start(context.Background(), kwok.Options{})
		if sharedKwok.err == nil {
			fmt.Fprintf(os.Stderr, "kwok cluster %s ready in %v\n", sharedKwok.cluster.Name(), sharedKwok.cluster.Started.Round(time.Millisecond))
		}
	})
	if err := sharedKwok.err; err != nil {
		if errors.Is(err, kwok.ErrNoBinaries) && !kwok.Required() {
			t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
		}
		t.Fatalf("kwok: %v", err)
	}
	return sharedKwok.cluster
}

func stopKwok() error {
	if c := sharedKwok.cluster; c != nil {
		return c.Stop()
	}
	return nil
}

// Require returns the shared control plane for a test, or ends the test
// when the binaries are missing: a failure under CI (see envtest.Required),
// a loud skip elsewhere.
func Require(t testing.TB) *envtest.ControlPlane {
	t.Helper()
	return RequireWith(t, envtest.Options{})
}

// RequireWith is Require for the shared control plane started with opts.
func RequireWith(t testing.TB, opts envtest.Options) *envtest.ControlPlane {
	t.Helper()
	cp, err := envtest.SharedWith(context.Background(), opts)
	if err == nil {
		return cp
	}
	if errors.Is(err, envtest.ErrNoAssets) && !envtest.Required() {
		t.Skipf("SKIPPED (envtest): %v. Set CI=true or CONVERGE_REQUIRE_ENVTEST=1 to make this a failure.", err)
	}
	t.Fatalf("envtest: %v", err)
	return nil
}

// RequireRun is Require plus a run on the shared control plane: a Backend
// with a fresh namespace named prefix plus a suffix, stopped when the test
// ends.
func RequireRun(t testing.TB, prefix string) (*envtest.ControlPlane, *sim.Env) {
	t.Helper()
	return RequireRunWith(t, prefix, envtest.Options{})
}

// RequireRunWith is RequireRun on the shared control plane started with
// opts.
func RequireRunWith(t testing.TB, prefix string, opts envtest.Options) (*envtest.ControlPlane, *sim.Env) {
	t.Helper()
	cp := RequireWith(t, opts)
	b, err := envtest.NewBackend(cp, prefix)
	if err != nil {
		t.Fatal(err)
	}
	env, err := b.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("stopping the run: %v", err)
		}
	})
	KeepLogsOnFailure(t, cp)
	return cp, env
}

// KeepLogsOnFailure copies cp's component logs into the test's artifacts
// (kept with go test -artifacts) and logs their last lines, with the
// paths, when the test has failed by its end.
func KeepLogsOnFailure(t testing.TB, cp *envtest.ControlPlane) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := t.ArtifactDir()
		if err := cp.KeepLogs(dir); err != nil {
			t.Logf("keeping the control plane's logs: %v", err)
		}
		t.Logf("the control plane's logs (copied to %s) end with:\n%s", dir, cp.LogTails(20))
	})
}
