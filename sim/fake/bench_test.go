package fake_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/sim/fake"
)

// doors are the clients a benchmark runs on: the typed clientset (door 1)
// and, where the backend has one, a clientset over its REST handler.
func doors(b *testing.B) map[string]func(*testing.B) (kubernetes.Interface, func()) {
	return map[string]func(*testing.B) (kubernetes.Interface, func()){
		"clientset": func(b *testing.B) (kubernetes.Interface, func()) {
			be, err := fake.New(fake.Config{})
			require.NoError(b, err)
			env, err := be.Start(context.Background())
			require.NoError(b, err)
			return env.Observer, func() { _ = be.Stop() }
		},
		"rest": func(b *testing.B) (kubernetes.Interface, func()) {
			be, err := fake.New(fake.Config{})
			require.NoError(b, err)
			env, err := be.Start(context.Background())
			require.NoError(b, err)
			cfg := rest.CopyConfig(env.RESTConfig)
			cfg.QPS = -1 // no client-side throttling: the request's own cost
			c, err := kubernetes.NewForConfig(cfg)
			require.NoError(b, err)
			return c, func() { _ = be.Stop() }
		},
	}
}

// BenchmarkRequest is the cost of one request of each common kind, all in:
// what a controller's client pays per call on the fake backend.
func BenchmarkRequest(b *testing.B) {
	ctx := context.Background()
	for _, door := range []string{"clientset", "rest"} {
		open, ok := doors(b)[door]
		if !ok {
			continue
		}
		b.Run(door, func(b *testing.B) {
			b.Run("create-pod", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				pods := c.CoreV1().Pods(ns)
				b.ReportAllocs()
				for i := range b.N {
					if _, err := pods.Create(ctx, pod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("get-deployment", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				deploys := c.AppsV1().Deployments(ns)
				_, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
				require.NoError(b, err)
				b.ReportAllocs()
				for range b.N {
					if _, err := deploys.Get(ctx, "web", metav1.GetOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("update-deployment", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				deploys := c.AppsV1().Deployments(ns)
				d, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
				require.NoError(b, err)
				b.ReportAllocs()
				for i := range b.N {
					d.Labels["n"] = fmt.Sprint(i)
					if d, err = deploys.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("update-status", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				deploys := c.AppsV1().Deployments(ns)
				d, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
				require.NoError(b, err)
				b.ReportAllocs()
				for i := range b.N {
					d.Status.ObservedGeneration = int64(i + 1)
					if d, err = deploys.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("patch-deployment", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				deploys := c.AppsV1().Deployments(ns)
				_, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
				require.NoError(b, err)
				b.ReportAllocs()
				for i := range b.N {
					patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, i%50+1)
					if _, err := deploys.Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("list-100-pods", func(b *testing.B) {
				c, stop := open(b)
				defer stop()
				pods := c.CoreV1().Pods(ns)
				for i := range 100 {
					_, err := pods.Create(ctx, pod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{})
					require.NoError(b, err)
				}
				b.ReportAllocs()
				for range b.N {
					if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkHeapPer1000Pods reports the heap the backend holds for 1,000
// stored pods (history included), as bytes per pod.
func BenchmarkHeapPer1000Pods(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		be, err := fake.New(fake.Config{})
		require.NoError(b, err)
		env, err := be.Start(ctx)
		require.NoError(b, err)
		for i := range 1000 {
			_, err := env.Observer.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{})
			require.NoError(b, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1000, "heap-B/pod")
		runtime.KeepAlive(env)
		_ = be.Stop()
	}
}

// pod is a pod as a ReplicaSet controller makes one, its owner aside (the
// garbage collector would delete a pod whose owner does not exist):
// labels and one container.
func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
	}
}
