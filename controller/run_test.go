package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/converge-lab/converge/controller"
)

// TestRunLeavesNoGoroutines runs in real time, with leader election, events
// and metrics on, and checks with goleak that nothing Run started survives it.
func TestRunLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
	const grace = 5 * time.Second
	ctl, err := controller.New(controller.Config{
		ShutdownGrace:  grace,
		LeaderElection: election("solo"),
	}, c.cs)
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()

	require.Eventually(t, func() bool { return ctl.Ready() == nil }, 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return c.successfulPatches() == 1 }, 30*time.Second, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(grace):
		t.Fatalf("Run did not return within the shutdown grace of %v", grace)
	}
	require.Empty(t, leaseHolder(c), "lease released")
}

// BenchmarkReconcile measures reconciles per second with 1,000 managed
// Deployments (2 pods each) on the fake clientset, through the workqueue.
// steady: every Deployment is at its fixed point, a reconcile reads the
// caches and decides nothing.
func BenchmarkReconcile(b *testing.B) {
	const deployments = 1000
	b.Run("steady", func(b *testing.B) {
		var objs []runtime.Object
		for i := range deployments {
			name := fmt.Sprintf("web-%04d", i)
			objs = append(objs, deployment(name, 2))
			objs = append(objs, pods(name, 2, 2)...)
		}
		c := newCluster(b, objs...)
		ctl, reconciles, stop := runForBench(b, c)
		defer stop()

		b.ResetTimer()
		start := time.Now()
		for done := 0; done < b.N; done += deployments {
			target := reconciles() + deployments
			for i := range deployments {
				ctl.Enqueue(ns, fmt.Sprintf("web-%04d", i))
			}
			for reconciles() < target {
				time.Sleep(100 * time.Microsecond)
			}
		}
		b.ReportMetric(float64(roundUp(b.N, deployments))/time.Since(start).Seconds(), "reconciles/s")
	})
}

func roundUp(n, step int) int { return (n + step - 1) / step * step }

func runForBench(b *testing.B, c *cluster) (*controller.Controller, func() float64, func()) {
	b.Helper()
	ctl, err := controller.New(controller.Config{}, c.cs)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	require.Eventually(b, func() bool { return ctl.Ready() == nil }, time.Minute, time.Millisecond)
	reconciles := func() float64 {
		return metric(b, ctl.Registry(), "converge_scaler_reconciles_total", "result", "success")
	}
	return ctl, reconciles, func() { cancel(); require.NoError(b, <-done) }
}
