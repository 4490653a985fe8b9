// Package simtest holds the backends' test helpers: the envtest control
// plane a test binary shares (Main, Require), which ends a test loudly
// when its binaries are missing, and fails it under CI.
package simtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
)

// Main runs a test binary's tests and stops the shared control planes after
// them: call it from TestMain as os.Exit(simtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if err := envtest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
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
	return cp, env
}
