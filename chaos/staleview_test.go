package chaos_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// door is one way a controller's clients reach an API with a plan
// installed: each instance's client through its own injector, all sharing
// the run's state (as the harness builds them).
type door struct {
	name string
	// virtual doors run in a synctest bubble.
	virtual bool
	// streams: the door's informers stream their first list
	// (sendInitialEvents), as client-go's do against an HTTP server.
	streams bool
	start   func(t *testing.T) (env *sim.Env, client func(inj *chaos.Injector) kubernetes.Interface)
}

// hold is how long a view fault holds on d: long in virtual time, short
// where the clock is real.
func (d door) hold() time.Duration {
	if d.virtual {
		return 30 * time.Second
	}
	return 3 * time.Second
}

func staleDoors() []door {
	onFake := func(t *testing.T) (*sim.Env, *fake.Backend) {
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Stop()) })
		return env, b
	}
	overHTTP := func(t *testing.T, env *sim.Env) func(*chaos.Injector) kubernetes.Interface {
		return func(inj *chaos.Injector) kubernetes.Interface {
			c, err := kubernetes.NewForConfig(chaos.Configure(env.RESTConfig, inj))
			require.NoError(t, err)
			return c
		}
	}
	return []door{
		{name: "fake clientset", virtual: true, start: func(t *testing.T) (*sim.Env, func(*chaos.Injector) kubernetes.Interface) {
			env, b := onFake(t)
			return env, func(inj *chaos.Injector) kubernetes.Interface {
				c, err := b.NewClient()
				require.NoError(t, err)
				require.NoError(t, inj.InstallFake(&c.Fake))
				return c
			}
		}},
		{name: "fake HTTP", virtual: true, streams: true, start: func(t *testing.T) (*sim.Env, func(*chaos.Injector) kubernetes.Interface) {
			env, _ := onFake(t)
			return env, overHTTP(t, env)
		}},
		{name: "envtest", streams: true, start: func(t *testing.T) (*sim.Env, func(*chaos.Injector) kubernetes.Interface) {
			_, env := simtest.RequireRun(t, "stale-")
			return env, overHTTP(t, env)
		}},
	}
}

// onDoor runs body on d, in a bubble where d is virtual.
func onDoor(t *testing.T, d door, body func(t *testing.T)) {
	if d.virtual {
		synctest.Test(t, body)
		return
	}
	if d.name == "envtest" {
		simtest.Require(t)
	}
	body(t)
}

// instances builds the injectors of a run's instances from one plan.
type instances struct {
	plan   chaos.Plan
	shared chaos.Shared
	log    chaos.Log
}

func (c *instances) injector(t *testing.T, restarted bool) *chaos.Injector {
	t.Helper()
	p := c.plan
	p.Shared, p.Recorder, p.Restarted = &c.shared, &c.log, restarted
	inj, err := chaos.NewInjector(p)
	require.NoError(t, err)
	return inj
}

// podInformer starts a pod informer on client and returns it, the names
// its first list delivered (sorted), and a stop.
func podInformer(t *testing.T, client kubernetes.Interface, ns string, virtual bool) (cache.SharedIndexInformer, func() []string, func()) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	var initial []string
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: func(obj any, isInInitialList bool) {
		if isInInitialList {
			mu.Lock()
			initial = append(initial, obj.(*corev1.Pod).Name)
			mu.Unlock()
		}
	}})
	require.NoError(t, err)
	stop := make(chan struct{})
	factory.Start(stop)
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); factory.Shutdown() }) }
	t.Cleanup(halt)
	// The registration, not the informer: the informer has synced once
	// its first list is in its store, its handler only once that list
	// has been delivered to it.
	waitFor(t, virtual, reg.HasSynced)
	return inf, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(initial))
	}, halt
}

// waitFor polls cond: in virtual time by letting the bubble run, in real
// time with a deadline.
func waitFor(t *testing.T, virtual bool, cond func() bool) {
	t.Helper()
	if virtual {
		for deadline := time.Now().Add(5 * time.Minute); !cond(); {
			require.True(t, time.Now().Before(deadline), "not within 5 virtual minutes")
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		return
	}
	require.Eventually(t, cond, 60*time.Second, 10*time.Millisecond)
}

// firstLife is an instance's life before the restart: its informer syncs
// (seeing pod "a", made by someone else), it creates pod "b", and it
// ends. It returns b's resourceVersion.
func firstLife(t *testing.T, d door, env *sim.Env, client kubernetes.Interface) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(ctx, pod("a"), metav1.CreateOptions{})
	require.NoError(t, err)
	inf, _, halt := podInformer(t, client, env.Namespace, d.virtual)
	waitFor(t, d.virtual, func() bool { return cached(inf, env.Namespace, "a") })
	b, err := client.CoreV1().Pods(env.Namespace).Create(ctx, pod("b"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, d.virtual, func() bool { return cached(inf, env.Namespace, "b") })
	halt()
	rv, err := strconv.ParseInt(b.ResourceVersion, 10, 64)
	require.NoError(t, err)
	return rv
}

func outcomes(log *chaos.Log) []string {
	var out []string
	for _, f := range log.Firings() {
		out = append(out, f.Outcome)
	}
	return out
}

// A time-travel on a restarted instance serves its informer the view from
// before its last write: the cache really holds the past (pod "a", not the
// "b" it had created), its watch is held for the hold, then it catches up.
func TestTimeTravelServesARestartedInformerThePast(t *testing.T) {
	for _, d := range staleDoors() {
		t.Run(d.name, func(t *testing.T) {
			onDoor(t, d, func(t *testing.T) {
				hold := d.hold()
				run := &instances{plan: chaos.Plan{Injections: []chaos.Injection{{
					Fault: chaos.TimeTravel(chaos.Target{Resource: "pods"}, 0, 1, 0, hold),
					When:  chaos.When{Restarted: true},
				}}}}
				env, client := d.start(t)
				rv := firstLife(t, d, env, client(run.injector(t, false)))
				assert.Empty(t, run.log.Firings(), "the first instance is not a restarted one")

				fired := time.Now()
				inf, initial, _ := podInformer(t, client(run.injector(t, true)), env.Namespace, d.virtual)
				assert.Equal(t, []string{"a"}, initial(), "the restarted informer's first list is the view before its write")
				assert.False(t, cached(inf, env.Namespace, "b"), "its cache went back")
				assert.Equal(t, strconv.FormatInt(rv-1, 10), inf.LastSyncResourceVersion(), "listed at the resourceVersion before the write")
				waitFor(t, d.virtual, func() bool { return cached(inf, env.Namespace, "b") })
				assert.GreaterOrEqual(t, time.Since(fired), hold, "its watch caught up once the hold ended")
				got := outcomes(&run.log)
				require.Len(t, got, 1, "one firing: the window serves the lists that follow")
				assert.Equal(t, "view set at resourceVersion "+strconv.FormatInt(rv-1, 10)+", held "+hold.String(), got[0])
			})
		})
	}
}

// A time-travel with deletions serves a restarted informer the view from
// before the last deletion its predecessor was told of: the pod someone
// deleted is back in its cache until the hold ends, then its deletion
// arrives.
func TestTimeTravelBeforeADeletionHoldsTheDeletedObject(t *testing.T) {
	for _, d := range staleDoors() {
		t.Run(d.name, func(t *testing.T) {
			onDoor(t, d, func(t *testing.T) {
				hold := d.hold()
				run := &instances{plan: chaos.Plan{Injections: []chaos.Injection{}}}
				in, err := chaos.Spec{Fault: chaos.FaultTimeTravel, Target: chaos.Target{Resource: "pods"}, Deletions: 1, Hold: hold,
					When: chaos.When{Restarted: true}}.Build()
				require.NoError(t, err)
				run.plan.Injections = append(run.plan.Injections, in)
				env, client := d.start(t)
				ctx := context.Background()
				for _, name := range []string{"a", "b"} {
					_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(ctx, pod(name), metav1.CreateOptions{})
					require.NoError(t, err)
				}
				inf, _, halt := podInformer(t, client(run.injector(t, false)), env.Namespace, d.virtual)
				waitFor(t, d.virtual, func() bool { return cached(inf, env.Namespace, "a") && cached(inf, env.Namespace, "b") })
				require.NoError(t, env.Observer.CoreV1().Pods(env.Namespace).Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
				waitFor(t, d.virtual, func() bool { return !cached(inf, env.Namespace, "a") })
				halt()

				restarted, initial, _ := podInformer(t, client(run.injector(t, true)), env.Namespace, d.virtual)
				assert.Equal(t, []string{"a", "b"}, initial(), "the restarted informer's first list still holds the deleted pod")
				waitFor(t, d.virtual, func() bool { return !cached(restarted, env.Namespace, "a") })
				got := outcomes(&run.log)
				require.Len(t, got, 1)
				assert.Contains(t, got[0], "view set at resourceVersion ")
			})
		})
	}
}

// A stale read serves what the API's contract allows: a restarted
// informer's first list at resourceVersion "0" (the clientset's informers)
// from the past, after which its watch replays at once; a streamed list
// asks for the current state and is left alone; a list "not older than" a
// version is never served older than it.
func TestStaleReadServesOnlyWhatTheContractAllows(t *testing.T) {
	for _, d := range staleDoors() {
		t.Run(d.name, func(t *testing.T) {
			onDoor(t, d, func(t *testing.T) {
				run := &instances{plan: chaos.Plan{Injections: []chaos.Injection{{
					Fault: chaos.StaleRead(chaos.Target{Resource: "pods"}, 0, 1, 0),
					When:  chaos.When{Restarted: true},
				}}}}
				env, client := d.start(t)
				rv := firstLife(t, d, env, client(run.injector(t, false)))
				restarted := client(run.injector(t, true))
				inf, initial, _ := podInformer(t, restarted, env.Namespace, d.virtual)
				if d.streams {
					assert.Equal(t, []string{"a", "b"}, initial(), "a streamed first list asks for the current state")
					assert.Empty(t, run.log.Firings())
				} else {
					assert.Equal(t, []string{"a"}, initial(), "a first list at resourceVersion 0 may be served from the past")
				}
				waitFor(t, d.virtual, func() bool { return cached(inf, env.Namespace, "b") })

				pods := restarted.CoreV1().Pods(env.Namespace)
				any, err := pods.List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
				require.NoError(t, err)
				assert.Equal(t, strconv.FormatInt(rv-1, 10), any.ResourceVersion, "resourceVersion 0: any state")
				assert.Len(t, any.Items, 1)
				floor, err := pods.List(context.Background(), metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10)})
				require.NoError(t, err)
				assert.Equal(t, strconv.FormatInt(rv, 10), floor.ResourceVersion, "not older than the version asked for")
				current, err := pods.List(context.Background(), metav1.ListOptions{})
				require.NoError(t, err)
				assert.Len(t, current.Items, 2, "no resourceVersion: the current state")
				assert.True(t, slices.ContainsFunc(outcomes(&run.log), func(o string) bool { return strings.HasPrefix(o, "view set at") }))
			})
		})
	}
}
