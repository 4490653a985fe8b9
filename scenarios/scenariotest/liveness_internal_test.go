package scenariotest

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/sim/fake"
)

// resync is how often the stampers' informers deliver every object
// again: what brings back a key a stamper dropped.
const resync = 30 * time.Second

// stamps is a world where nothing happens once the controller has
// labelled its five ConfigMaps: a key dropped is picked up again by the
// controller's resync alone, well within the deadline.
const stamps = `
name: stamps
catches: a ConfigMap never labelled
objects:
  - count: 5
    manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: "s-{{index}}"}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, labels: seen=yes}
      count: 5
timing: {deadline: 2m, settle: 5s}
`

// stamp labels cm seen=yes, on a copy; nothing when it is.
func stamp(cm *corev1.ConfigMap) *corev1.ConfigMap {
	if cm.Labels["seen"] == "yes" {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["seen"] = "yes"
	return cm
}

// stamper is a plain client-go controller that labels each ConfigMap,
// with a workqueue and an informer resynced every 30 s, and no Probe. With
// named, its queue has a name, so the harness reads it through client-go's
// workqueue metrics; without, the harness sees nothing of its inside. With
// drops, a pass whose update meets a 409 forgets its key. With jitter,
// once a ConfigMap is labelled seen it waits 10 s or 20 s, drawn from the
// unseeded math/rand, and then labels it checked: a controller's own
// randomness, which no seed fixes.
type stamper struct{ drops, jitter, named bool }

func (s stamper) Name() string {
	name := "stamper"
	if s.named {
		name += "-named"
	}
	switch {
	case s.drops:
		name += "-drops"
	case s.jitter:
		name += "-jitter"
	}
	return name
}

func (s stamper) New(in scenarios.Instance) (scenarios.Runner, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(in.Client, resync, informers.WithNamespace(in.Namespace))
	cms := factory.Core().V1().ConfigMaps()
	var config workqueue.TypedRateLimitingQueueConfig[string]
	if s.named {
		config.Name = "stamps"
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), config)
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return nil, err
	}
	var waited sync.Map // keys whose drawn wait has begun
	sync := func(ctx context.Context, key string) error {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		cm, err := cms.Lister().ConfigMaps(ns).Get(name)
		if err != nil {
			return nil
		}
		next := stamp(cm)
		if next == nil && s.jitter && cm.Labels["checked"] != "yes" {
			if _, began := waited.LoadOrStore(key, true); !began {
				queue.AddAfter(key, time.Duration(10+10*rand.IntN(2))*time.Second)
				return nil
			}
			next = cm.DeepCopy()
			next.Labels["checked"] = "yes"
		}
		if next == nil {
			return nil
		}
		_, err = in.Client.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{})
		return err
	}
	return stamperRun(func(ctx context.Context) error {
		defer queue.ShutDown()
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), cms.Informer().HasSynced) {
			return nil
		}
		go func() {
			<-ctx.Done()
			queue.ShutDown()
		}()
		for {
			key, quit := queue.Get()
			if quit {
				return nil
			}
			switch err := sync(ctx, key); {
			case err == nil, s.drops && apierrors.IsConflict(err):
				queue.Forget(key)
			default:
				queue.AddRateLimited(key)
			}
			queue.Done(key)
		}
	}), nil
}

type stamperRun func(ctx context.Context) error

func (f stamperRun) Run(ctx context.Context) error { return f(ctx) }

// stamperManager is the same controller on controller-runtime, its cache
// resynced every 30 s. With drops, a Reconcile whose update meets a 409
// returns no error.
func stamperManager(drops bool) scenarios.Manager {
	name := "stamper-manager"
	if drops {
		name += "-drops"
	}
	return scenarios.Manager{
		ControllerName: name,
		Options:        func(o *manager.Options) { o.Cache.SyncPeriod = ptr.To(resync) },
		Setup: func(mgr manager.Manager, _ scenarios.Instance) error {
			c := mgr.GetClient()
			return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named(name).
				Complete(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
					cm := &corev1.ConfigMap{}
					if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
						return ctrl.Result{}, client.IgnoreNotFound(err)
					}
					if cm = stamp(cm); cm == nil {
						return ctrl.Result{}, nil
					}
					err := c.Update(ctx, cm)
					if drops && apierrors.IsConflict(err) {
						return ctrl.Result{}, nil
					}
					return ctrl.Result{}, err
				}))
		},
	}
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

// checks is a world of one ConfigMap that the jittered stamper labels,
// then labels checked 10 s or 20 s later: references and runs draw their
// waits apart, and a few of them may all draw the same.
const checks = `
name: checks
catches: a ConfigMap never checked
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: s-0}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, labels: "seen=yes,checked=yes"}
      count: 1
timing: {deadline: 2m, settle: 5s}
`

// stampsUnder is the stamps world under each fault profile that runs on
// fake with one instance, by profile name.
func stampsUnder(t *testing.T) map[string]*scenarios.Scenario {
	t.Helper()
	return worldUnder(t, stamps)
}

// worldUnder is the world the scenario text describes under each fault
// profile that runs on fake with one instance, by profile name.
func worldUnder(t *testing.T, text string) map[string]*scenarios.Scenario {
	t.Helper()
	base, err := scenarios.Parse("world.yaml", []byte(text))
	require.NoError(t, err)
	profiles, err := scenarios.FaultProfiles()
	require.NoError(t, err)
	out := map[string]*scenarios.Scenario{}
	for _, p := range profiles {
		u, err := base.Under(p)
		// The stampers elect no leader: they run as one instance.
		if err == nil && u.RunsOn(fake.Name) && u.Controller.Instances <= 1 {
			out[p.Name] = u
		}
	}
	require.Contains(t, out, "conflicts")
	return out
}

// A controller that drops a key after a 409 and is healed only by its
// resync converges within the deadline, so the goal passes it; against
// fault-free runs of the same world it converged late, after sending
// nothing for longer than they ever did: a liveness finding, for a
// controller-runtime manager, for a plain client-go controller whose
// named queue the harness reads, and for one whose unnamed queue it
// cannot.
func TestAKeyDroppedUntilTheResyncIsLate(t *testing.T) {
	conflicts := stampsUnder(t)["conflicts"]
	for _, tc := range []struct {
		c scenarios.Controller
		// alone: nothing else catches it. A manager's probe and a named
		// queue count their retries, so retries-failed-writes sees the
		// drop too.
		alone bool
	}{{stamperManager(true), false}, {stamper{drops: true, named: true}, false}, {stamper{drops: true}, true}} {
		c := tc.c
		t.Run(c.Name(), func(t *testing.T) {
			caught := Catches(t, []*scenarios.Scenario{conflicts}, c)
			require.Len(t, caught, 1)
			res := caught[0].Result
			assert.True(t, res.Converged, "the goal alone passes it")
			assert.Less(t, time.Duration(res.TimeToConverge), time.Duration(conflicts.Timing.Deadline))
			i := slices.IndexFunc(caught[0].Findings, func(f reports.Finding) bool { return f.Kind == reports.KindLiveness })
			require.GreaterOrEqual(t, i, 0, "%v", caught[0])
			f := caught[0].Findings[i]
			assert.Equal(t, reports.CheckLiveness, f.Check)
			assert.Contains(t, f.Sentence(res.Started), "converged late: converged after ")
			assert.Contains(t, f.Detail, "the controller sent nothing for ")
			if tc.alone {
				assert.Equal(t, []string{reports.CheckLiveness}, caught[0].Checks())
			} else {
				assert.Contains(t, caught[0].Checks(), check.RetriesFailedWrites)
			}
			t.Log(caught[0])
		})
	}
}

// The same controllers without the bug converge on time under every
// fault profile that runs on fake, over 20 seeds: the liveness oracle's
// silence.
func TestTheCorrectStampersAreOnTime(t *testing.T) {
	const seeds = 20
	under := stampsUnder(t)
	for _, c := range []scenarios.Controller{stamperManager(false), stamper{}, stamper{named: true}} {
		t.Run(c.Name(), func(t *testing.T) {
			live := NewLiveness(1, nil)
			for _, name := range slices.Sorted(maps.Keys(under)) {
				for seed := uint64(1); seed <= seeds; seed++ {
					res := RunFake(t, under[name], scenarios.Options{Seed: seed, Controller: c})
					require.Empty(t, res.Error)
					live.Judge(t, under[name], c, res)
					assert.True(t, res.Pass, "%s, seed %d: %v", name, seed, res.Reasons)
				}
			}
		})
	}
}

// A controller that draws its own waits converges at different times in
// different runs of one world, and a fault's run may draw a longer wait
// than every first reference did: that is no finding. The references
// topped up, and the run judged late run again with its seed, learn the
// controller's timing first: silent over 20 seeds of every one-instance
// profile.
func TestARandomWaitIsNotLate(t *testing.T) {
	under := worldUnder(t, checks)
	c := stamper{jitter: true}
	live := NewLiveness(1, nil)
	var converged []time.Duration
	for _, name := range slices.Sorted(maps.Keys(under)) {
		for seed := uint64(1); seed <= 20; seed++ {
			res := RunFake(t, under[name], scenarios.Options{Seed: seed, Controller: c})
			require.Empty(t, res.Error)
			live.Judge(t, under[name], c, res)
			assert.True(t, res.Pass, "%s, seed %d: %v", name, seed, res.Reasons)
			converged = append(converged, time.Duration(res.TimeToConverge).Round(time.Second))
		}
	}
	slices.Sort(converged)
	converged = slices.Compact(converged)
	assert.Greater(t, len(converged), 1, "the controller's waits show in when runs converge: %v", converged)
	t.Logf("runs converged after %v", converged)
}
