package world_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/world"
)

// BenchmarkFakeWorldScale creates 1,000 Deployments of 5 replicas on the
// fake backend, with pods ready at once, and measures the wall time until
// all 5,000 pods are ready, and the heap in use then.
func BenchmarkFakeWorldScale(b *testing.B) {
	const deployments, replicas = 1000, 5
	for b.Loop() {
		be, err := fake.New(fake.Config{})
		require.NoError(b, err)
		env, err := be.Start(context.Background())
		require.NoError(b, err)
		w, err := world.New(world.Config{
			Client: env.Observer, Namespace: env.Namespace, Nodes: 50,
			Readiness: world.Model{Kind: world.ReadyAfterDelay}, Scheduler: true, Deployments: true,
		})
		require.NoError(b, err)
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- w.Run(ctx) }()
		for i := range deployments {
			_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), deployment(fmt.Sprintf("web-%04d", i), replicas), metav1.CreateOptions{})
			require.NoError(b, err)
		}
		for {
			list, err := env.Observer.AppsV1().Deployments(env.Namespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(b, err)
			ready := 0
			for _, d := range list.Items {
				ready += int(d.Status.ReadyReplicas)
			}
			if ready == deployments*replicas {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		runtime.GC()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		b.ReportMetric(elapsed.Seconds(), "s-to-all-ready")
		b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "MiB-heap")
		cancel()
		require.NoError(b, <-done)
		require.NoError(b, be.Stop())
	}
}
