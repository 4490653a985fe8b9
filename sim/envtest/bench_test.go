package envtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

// BenchmarkBootAndStop starts and stops a whole control plane
// (kube-apiserver, etcd, kube-controller-manager, config/'s RBAC).
func BenchmarkBootAndStop(b *testing.B) {
	if _, err := envtest.FindAssets(); err != nil {
		b.Skip(err)
	}
	var boot, stop time.Duration
	for b.Loop() {
		cp, err := envtest.StartControlPlane(context.Background())
		require.NoError(b, err)
		boot += cp.BootTime
		began := time.Now()
		require.NoError(b, cp.Stop())
		stop += time.Since(began)
	}
	b.ReportMetric(boot.Seconds()/float64(b.N), "s-boot")
	b.ReportMetric(stop.Seconds()/float64(b.N), "s-stop")
}

// BenchmarkRunSetup is what one scenario costs on the shared control plane:
// a namespace, a world with 3 simulated Nodes, and their removal.
func BenchmarkRunSetup(b *testing.B) {
	cp := simtest.Require(b)
	for b.Loop() {
		be, err := envtest.NewBackend(cp, "bench-")
		require.NoError(b, err)
		env, err := be.Start(context.Background())
		require.NoError(b, err)
		w, err := world.New(world.Config{Client: env.Observer, Namespace: env.Namespace, Scheduler: true})
		require.NoError(b, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		for len(w.Nodes()) < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		require.NoError(b, <-done)
		require.NoError(b, be.Stop())
	}
}
