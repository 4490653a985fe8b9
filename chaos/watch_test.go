package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/chaos"
)

func cached(inf cache.SharedIndexInformer, ns, name string) bool {
	_, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
	return ok
}

// Dropped frames are changes the informer never sees: a pod created after
// the dropped one arrives, the dropped one does not.
func TestWatchDropHidesChanges(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, _, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchDrop(chaos.Target{Resource: "pods", Name: "hidden"}),
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	pods := env.Observer.CoreV1().Pods(env.Namespace)
	_, err := pods.Create(context.Background(), pod("hidden"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(context.Background(), pod("visible"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cached(inf, env.Namespace, "visible") }, 30*time.Second, 10*time.Millisecond)
	assert.False(t, cached(inf, env.Namespace, "hidden"), "the stream is ordered: hidden came first and was dropped")
	assert.NotEmpty(t, log.Firings())
}

// Delayed frames reach the cache late.
func TestWatchDelayMakesTheCacheStale(t *testing.T) {
	t.Parallel() // a namespace of its own
	const delay = 2 * time.Second
	env, cfg, _, _ := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchDelay(chaos.Target{Resource: "pods", Name: "slow"}, delay),
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	created := time.Now()
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("slow"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cached(inf, env.Namespace, "slow") }, 30*time.Second, 10*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(created), delay)
}

// Duplicated frames reach the handlers twice: an update whose old and new
// objects have the same resourceVersion.
func TestWatchDuplicateRepeatsEvents(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, _, _ := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchDuplicate(chaos.Target{Resource: "pods", Name: "twice"}),
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	var mu sync.Mutex
	sameRV := 0
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, cur any) {
		if old.(*corev1.Pod).ResourceVersion == cur.(*corev1.Pod).ResourceVersion {
			mu.Lock()
			sameRV++
			mu.Unlock()
		}
	}})
	require.NoError(t, err)
	_, err = env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("twice"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return sameRV > 0 }, 30*time.Second, 10*time.Millisecond,
		"the repeated ADDED arrives as an update to the same version")
}

// A closed stream is watched again (from the last resourceVersion, or with a
// relist when the stream was young): the frame it cut is not lost.
func TestWatchCloseIsRecoveredFrom(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchClose(chaos.Target{Resource: "pods", Name: "reopen"}), When: chaos.When{Nth: 1},
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	watches := w.count("watch", "pods")
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("reopen"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cached(inf, env.Namespace, "reopen") }, 30*time.Second, 10*time.Millisecond)
	assert.Greater(t, w.count("watch", "pods"), watches, "watched again")
	assert.Len(t, log.Firings(), 1)
}
