package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/sim"
)

// plane is a supervised control plane whose outages and error the test
// sets.
type plane struct {
	mu      sync.Mutex
	outages []sim.Outage
	err     error
	changed chan struct{}
}

func newPlane() *plane { return &plane{changed: make(chan struct{})} }

func (p *plane) RestartAPIServer(context.Context) error { return nil }
func (p *plane) Compact(context.Context) error          { return nil }

func (p *plane) Outages() ([]sim.Outage, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sim.Outage(nil), p.outages...), p.changed
}

func (p *plane) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *plane) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// unreachable is a kubeconfig for an API server nobody serves.
func unreachable(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return path
}

// A run on a supervised plane that could not start a component again
// fails at once with the plane's error; one whose component is being
// started again waits for it, then goes on.
func TestARunOnABrokenPlaneFailsAtOnce(t *testing.T) {
	p := newPlane()
	p.set(func() { p.err = errors.New("the kwok cluster's kube-scheduler exited and could not be started again") })
	b, err := New(Config{Kubeconfig: unreachable(t), ControlPlane: p, Timeout: time.Second})
	require.NoError(t, err)
	_, err = b.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kube-scheduler exited and could not be started again")

}

// A down component is waited for until it is restarted, or until the
// limit, when the error names it.
func TestAwaitUp(t *testing.T) {
	p := newPlane()
	p.set(func() { p.outages = []sim.Outage{{Component: "etcd", At: time.Now(), Exit: "its process is gone"}} })
	err := awaitUp(context.Background(), p, 10*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the control plane is still down after 10ms: etcd exited (its process is gone)")

	// Restarted while it waits (or before it looks: either way up).
	done := make(chan error, 1)
	go func() { done <- awaitUp(context.Background(), p, time.Minute) }()
	p.set(func() { p.outages[0].Restarted = time.Now() })
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.set(func() { p.outages = append(p.outages, sim.Outage{Component: "kube-scheduler"}) })
	assert.ErrorIs(t, awaitUp(ctx, p, time.Minute), context.Canceled)
}
