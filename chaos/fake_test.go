package chaos_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
)

// onFake starts the fake backend in the current bubble and a controller
// client of it with plan installed.
func onFake(t *testing.T, plan chaos.Plan) (*sim.Env, *k8sfake.Clientset, *chaos.Log) {
	t.Helper()
	env, client, log, _ := onFakeInjector(t, plan)
	return env, client, log
}

// onFakeInjector is onFake that also returns the injector, for plans that
// need Start.
func onFakeInjector(t *testing.T, plan chaos.Plan) (*sim.Env, *k8sfake.Clientset, *chaos.Log, *chaos.Injector) {
	t.Helper()
	b, err := fake.New(fake.Config{})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Stop()) })
	client, err := b.NewClient()
	require.NoError(t, err)
	log := &chaos.Log{}
	plan.Recorder = log
	inj, err := chaos.NewInjector(plan)
	require.NoError(t, err)
	require.NoError(t, inj.InstallFake(&client.Fake))
	return env, client, log, inj
}

func countActions(c *k8sfake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func fakeInformer(t *testing.T, c *k8sfake.Clientset, ns string) (cache.SharedIndexInformer, chan any) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	deleted := make(chan any, 10)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { deleted <- obj }})
	require.NoError(t, err)
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	for !inf.HasSynced() {
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
	}
	return inf, deleted
}

func TestFakeConflictIsFollowedByARecomputedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, log := onFake(t, chaos.Plan{Injections: []chaos.Injection{{
			Fault: chaos.Conflict(chaos.Target{Resource: "deployments", Name: "web"}), When: chaos.When{Nth: 1},
		}}})
		createObserved(t, env, "web", 2)

		ctl, err := controller.New(controller.Config{}, client)
		require.NoError(t, err)
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)

		assert.Equal(t, int32(4), replicas(t, env, "web"))
		assert.Equal(t, 2, countActions(client, "patch", "deployments"), "the 409, then the recomputed write")
		require.Len(t, log.Firings(), 1)
		assert.Contains(t, log.Firings()[0].Outcome, "the object has been modified")
	})
}

func TestFakeTombstoneReachesDeleteFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, log := onFake(t, chaos.Plan{Injections: []chaos.Injection{{Fault: chaos.Tombstone(chaos.Target{Resource: "pods", Name: "victim"})}}})
		_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("victim"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, deleted := fakeInformer(t, client, env.Namespace)
		lists := countActions(client, "list", "pods")

		require.NoError(t, env.Observer.CoreV1().Pods(env.Namespace).Delete(context.Background(), "victim", metav1.DeleteOptions{}))
		time.Sleep(time.Minute) // past the reflector's backoff, in virtual time
		synctest.Wait()
		require.Len(t, deleted, 1)
		tomb, ok := (<-deleted).(cache.DeletedFinalStateUnknown)
		require.True(t, ok, "DeleteFunc got a tombstone")
		assert.Equal(t, env.Namespace+"/victim", tomb.Key)
		assert.Equal(t, lists+1, countActions(client, "list", "pods"), "one relist")
		assert.Len(t, log.Firings(), 1)
	})
}

func TestFakePartitionDelaysSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, log := onFake(t, chaos.Plan{Injections: []chaos.Injection{{
			Fault: chaos.Partition(chaos.Target{}), When: chaos.When{Until: 30 * time.Second},
		}}})
		start := time.Now()
		fakeInformer(t, client, env.Namespace)
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Second, "no sync while partitioned")
		assert.NotEmpty(t, log.Firings())
	})
}

func TestFakeWatchDropAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, _ := onFake(t, chaos.Plan{Injections: []chaos.Injection{
			{Fault: chaos.WatchDrop(chaos.Target{Resource: "pods", Name: "hidden"})},
			{Fault: chaos.WatchDelay(chaos.Target{Resource: "pods", Name: "slow"}, 5*time.Second)},
		}})
		inf, _ := fakeInformer(t, client, env.Namespace)
		pods := env.Observer.CoreV1().Pods(env.Namespace)
		for _, name := range []string{"hidden", "slow"} {
			_, err := pods.Create(context.Background(), pod(name), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		created := time.Now()
		synctest.Wait()
		assert.False(t, cached(inf, env.Namespace, "slow"), "not yet")
		for !cached(inf, env.Namespace, "slow") {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		assert.Equal(t, 5*time.Second, time.Since(created).Truncate(100*time.Millisecond), "late by the delay")
		assert.False(t, cached(inf, env.Namespace, "hidden"), "dropped")
	})
}

func TestFakeRefusesFaultsItCannotMean(t *testing.T) {
	inj, err := chaos.NewInjector(chaos.Plan{Injections: []chaos.Injection{
		{Fault: chaos.Throttle(chaos.Target{}, 1)},
		{Fault: chaos.ServerError(chaos.Target{}, 503, 2)},
		{Fault: chaos.ServerError(chaos.Target{}, 500, 0)},
	}})
	require.NoError(t, err)
	err = inj.InstallFake(&k8sfake.NewClientset().Fake)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "throttle: the fake clientset has no REST client")
	assert.Contains(t, err.Error(), "server-error")
	assert.NoError(t, chaos.ServerError(chaos.Target{}, 500, 0).Available(chaos.Clientset), "without Retry-After it means the same")
	assert.NoError(t, chaos.Throttle(chaos.Target{}, 1).Available(chaos.HTTP))
}

func TestFakeCrashFencesTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crashed := make(chan struct{})
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Stop()) }()
		client, err := b.NewClient()
		require.NoError(t, err)
		inj, err := chaos.NewInjector(chaos.Plan{
			Injections: []chaos.Injection{{Fault: chaos.Crash(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}), When: chaos.When{Nth: 1}}},
			OnCrash:    func() { close(crashed) },
		})
		require.NoError(t, err)
		require.NoError(t, inj.InstallFake(&client.Fake))

		createObserved(t, env, "web", 2)
		ctl, err := controller.New(controller.Config{}, client)
		require.NoError(t, err)
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		<-crashed
		cancel() // the harness kills the instance
		<-done

		assert.True(t, inj.Crashed())
		assert.Equal(t, int32(4), replicas(t, env, "web"), "the write before the crash landed")
		_, err = client.AppsV1().Deployments(env.Namespace).Get(context.Background(), "web", metav1.GetOptions{})
		assert.ErrorContains(t, err, "connection refused", "the dead instance's client reaches nothing")
	})
}

// A Terminate right after the scaler's first write shuts it down gracefully:
// Run returns nil within its grace and its Lease is released.
func TestFakeTerminateShutsDownGracefully(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Stop()) }()
		client, err := b.NewClient()
		require.NoError(t, err)
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		log := &chaos.Log{}
		inj, err := chaos.NewInjector(chaos.Plan{
			Recorder:    log,
			Injections:  []chaos.Injection{{Fault: chaos.Terminate(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}), When: chaos.When{Nth: 1}}},
			OnTerminate: cancel, // what SIGTERM does to the binary
		})
		require.NoError(t, err)
		require.NoError(t, inj.InstallFake(&client.Fake))

		createObserved(t, env, "web", 2)
		ctl, err := controller.New(controller.Config{
			ShutdownGrace:  10 * time.Second,
			LeaderElection: &controller.LeaderElectionConfig{Namespace: env.Namespace, Identity: "solo"},
		}, client)
		require.NoError(t, err)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		require.NoError(t, <-done, "a graceful exit")
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.False(t, inj.Crashed())
		assert.Equal(t, int32(4), replicas(t, env, "web"))
		lease, err := env.Observer.CoordinationV1().Leases(env.Namespace).Get(context.Background(), controller.DefaultLeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "released")
		require.Len(t, log.Firings(), 1)
	})
}

// createObserved creates a managed Deployment whose status has observed its
// generation, as the Deployment controller would report it.
func createObserved(t *testing.T, env *sim.Env, name string, replicas int32) {
	t.Helper()
	d, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), managed(name, replicas), metav1.CreateOptions{})
	require.NoError(t, err)
	d.Status.ObservedGeneration = d.Generation
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A partition that begins mid-run cuts the watches that are open, not only
// the requests made later: a pod created during it reaches the informer
// only once the partition is over, through a new watch.
func TestFakePartitionBreaksOpenWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, log, inj := onFakeInjector(t, chaos.Plan{Injections: []chaos.Injection{{
			Fault: chaos.Partition(chaos.Target{}), When: chaos.When{After: 5 * time.Second, Until: 20 * time.Second},
		}}})
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		inj.Start(ctx)
		t.Cleanup(func() { cancel(); inj.Wait() })
		inf, _ := fakeInformer(t, client, env.Namespace)
		watches := countActions(client, "watch", "pods")

		time.Sleep(10*time.Second - time.Since(start))
		_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "during"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(19*time.Second - time.Since(start))
		_, seen, _ := inf.GetStore().GetByKey(env.Namespace + "/during")
		assert.False(t, seen, "not while partitioned")
		require.NotEmpty(t, log.Firings())
		assert.Equal(t, "partition began: 1 open watch streams broken", log.Firings()[0].Outcome)

		for {
			if _, ok, _ := inf.GetStore().GetByKey(env.Namespace + "/during"); ok {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Second)
		assert.Greater(t, countActions(client, "watch", "pods"), watches, "watched again after the partition")
	})
}

func TestFakeWatchLostIsLearnedFromTheRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, client, log := onFake(t, chaos.Plan{Injections: []chaos.Injection{{Fault: chaos.WatchLost(chaos.Target{Resource: "pods", Name: "lost"})}}})
		inf, _ := fakeInformer(t, client, env.Namespace)
		lists := countActions(client, "list", "pods")
		_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("lost"), metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(time.Minute) // past the reflector's backoff, in virtual time
		synctest.Wait()
		assert.True(t, cached(inf, env.Namespace, "lost"), "learned from the relist")
		assert.Equal(t, lists+1, countActions(client, "list", "pods"), "one relist")
		require.Len(t, log.Firings(), 1)
		assert.Equal(t, "dropped, stream ended with 410", log.Firings()[0].Outcome)
	})
}
