package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
)

// An API server restart, triggered by the client's own request, breaks the
// informer's watch: it watches again through the restarted server, and a
// pod created after the restart reaches its cache.
func TestAPIServerRestartIsSurvivedByTheInformer(t *testing.T) {
	_, env := simtest.RequireRun(t, "restart-")
	cfg, w, log, inj := throughInjector(t, env, chaos.Injection{
		Fault: chaos.APIServerRestart(chaos.Target{Verbs: []string{"create"}, Resource: "pods", Name: "trigger"}),
	})
	inf, _ := informerOn(t, cfg, env.Namespace)
	watches := w.count("watch", "pods")

	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = client.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("trigger"), metav1.CreateOptions{})
	require.NoError(t, err)
	inj.Wait()
	firings := log.Firings()
	require.Len(t, firings, 1)
	assert.Contains(t, firings[0].Outcome, "API server restarted in")
	assert.Equal(t, "create pods "+env.Namespace+"/trigger", firings[0].Request)

	_, err = env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok, _ := inf.GetStore().GetByKey(env.Namespace + "/after"); return ok },
		time.Minute, 20*time.Millisecond, "the informer reconnected and saw a pod created after the restart")
	assert.Greater(t, w.count("watch", "pods"), watches, "it watched again")
	t.Logf("pod LISTs: %d, watches: %d -> %d", w.lists("pods"), watches, w.count("watch", "pods"))
}

// A scheduled compaction compacts etcd and ends the informer's watch as a
// timeout would: it watches again from the resourceVersion it last saw,
// which etcd no longer has. The 410 comes from the server (the plan injects
// none), and the reflector lists again. Without a watch cache, as the cache
// would answer from memory.
func TestCompactionGivesTheServers410(t *testing.T) {
	t.Parallel() // a namespace of its own
	_, env := simtest.RequireRunWith(t, "compaction-", envtest.Options{NoWatchCache: true})
	require.True(t, env.Can.Has(sim.EtcdCompaction))
	cfg, w, log, inj := throughInjector(t, env, chaos.Injection{
		Fault: chaos.Compaction(chaos.Target{}), When: chaos.When{After: 2 * time.Second, Every: time.Second, Count: 2},
	})
	inf, _ := informerOn(t, cfg, env.Namespace)
	lists := w.lists("pods")
	// Writes elsewhere move etcd's revision past the informer's
	// resourceVersion, so the compaction removes it.
	for _, name := range []string{"a", "b"} {
		_, err := env.Observer.CoreV1().ConfigMaps(env.Namespace).Create(context.Background(), configMap(name), metav1.CreateOptions{})
		require.NoError(t, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	inj.Start(ctx)
	require.Eventually(t, func() bool { return len(log.Firings()) == 2 }, 30*time.Second, 20*time.Millisecond)
	cancel()
	inj.Wait()
	for _, f := range log.Firings() {
		assert.True(t, strings.HasPrefix(f.Outcome, "storage compacted; "), f.Outcome)
		assert.Equal(t, "schedule", f.Request)
	}
	require.Eventually(t, func() bool { return w.lists("pods") > lists }, 30*time.Second, 20*time.Millisecond, "relisted")
	assert.Positive(t, w.expired("pods"), "a resumed watch met the server's 410")

	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok, _ := inf.GetStore().GetByKey(env.Namespace + "/after"); return ok },
		time.Minute, 20*time.Millisecond)
}

// On a control plane with a watch cache, as on real clusters, the same
// compaction reaches no client: the resumed watch is answered from memory.
func TestCompactionIsMaskedByTheWatchCache(t *testing.T) {
	_, env := simtest.RequireRun(t, "compaction-cached-")
	assert.False(t, env.Can.Has(sim.EtcdCompaction))
	cfg, w, log, inj := throughInjector(t, env, chaos.Injection{
		Fault: chaos.Compaction(chaos.Target{}), When: chaos.When{After: 1500 * time.Millisecond, Count: 1},
	})
	informerOn(t, cfg, env.Namespace)
	_, err := env.Observer.CoreV1().ConfigMaps(env.Namespace).Create(context.Background(), configMap("a"), metav1.CreateOptions{})
	require.NoError(t, err)
	watches := w.count("watch", "pods")

	ctx, cancel := context.WithCancel(context.Background())
	inj.Start(ctx)
	require.Eventually(t, func() bool { return len(log.Firings()) == 1 }, 30*time.Second, 20*time.Millisecond)
	cancel()
	inj.Wait()
	require.Eventually(t, func() bool { return w.count("watch", "pods") > watches }, 30*time.Second, 20*time.Millisecond, "watched again")
	assert.Zero(t, w.expired("pods"), "no 410")
	assert.Equal(t, 1, w.lists("pods"), "no relist")
}

// A partition that begins mid-run breaks the informer's open watch: a pod
// created during it reaches the cache only after it ends.
func TestPartitionBreaksOpenWatches(t *testing.T) {
	t.Parallel() // a namespace of its own
	_, env := simtest.RequireRun(t, "partition-")
	cfg, w, log, inj := throughInjector(t, env, chaos.Injection{
		Fault: chaos.Partition(chaos.Target{}), When: chaos.When{After: 2 * time.Second, Until: 6 * time.Second},
	})
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	inj.Start(ctx)
	t.Cleanup(func() { cancel(); inj.Wait() })
	inf, _ := informerOn(t, cfg, env.Namespace)
	watches := w.count("watch", "pods")

	require.Eventually(t, func() bool { return len(log.Firings()) > 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "partition began: 1 open watch streams broken", log.Firings()[0].Outcome)
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("during"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok, _ := inf.GetStore().GetByKey(env.Namespace + "/during"); return ok },
		time.Minute, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), 6*time.Second, "not before the partition ended")
	assert.Greater(t, w.count("watch", "pods"), watches, "watched again")
}

// throughInjector is an admin config whose requests go through one
// injection (with the run's control plane) and are seen on the wire below it.
func throughInjector(t *testing.T, env *sim.Env, in chaos.Injection) (*rest.Config, *wire, *chaos.Log, *chaos.Injector) {
	t.Helper()
	log := &chaos.Log{}
	inj, err := chaos.NewInjector(chaos.Plan{Recorder: log, ControlPlane: env.ControlPlane, Injections: []chaos.Injection{in}})
	require.NoError(t, err)
	w := &wire{}
	cfg := rest.CopyConfig(env.RESTConfig)
	cfg.Wrap(w.wrap)
	return chaos.Configure(cfg, inj), w, log, inj
}
