package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2/ktesting"

	"github.com/converge-lab/converge/controller"
)

// instance is one running scaler.
type instance struct {
	ctl    *controller.Controller
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop cancels the instance's context and returns what Run returned.
func (i *instance) stop() error {
	i.once.Do(func() {
		i.cancel()
		i.err = <-i.done
	})
	return i.err
}

// start runs a scaler on c in the current bubble and waits until every
// goroutine is idle: caches synced, initial reconciles done.
func start(t *testing.T, c *cluster, cfg controller.Config) *instance {
	t.Helper()
	return startWith(t, c, cfg, nil)
}

func startWith(t *testing.T, c *cluster, cfg controller.Config, onPatch func(ctx context.Context, name string) error) *instance {
	t.Helper()
	i := launch(t, c, cfg, onPatch)
	waitReady(t, i.ctl)
	return i
}

// launch runs a scaler on c in the current bubble without waiting for it.
func launch(t *testing.T, c *cluster, cfg controller.Config, onPatch func(ctx context.Context, name string) error) *instance {
	t.Helper()
	var client = hookedClient{Interface: c.cs, onPatch: func(context.Context, string) error { return nil }}
	if onPatch != nil {
		client.onPatch = onPatch
	}
	ctl, err := controller.New(cfg, client)
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	i := &instance{ctl: ctl, cancel: cancel, done: make(chan error, 1)}
	go func() { i.done <- ctl.Run(ctx) }()
	t.Cleanup(func() { _ = i.stop() })
	return i
}

// waitReady advances virtual time until ctl is ready (the cache-sync barrier
// polls every 100ms), then until every goroutine is idle.
func waitReady(t *testing.T, ctl *controller.Controller) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for ctl.Ready() != nil {
		require.True(t, time.Now().Before(deadline), "not ready after a virtual minute: %v", ctl.Ready())
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
	}
	synctest.Wait()
}

func TestScalesWhenHalfThePodsAreUnready(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 1))...)
		i := start(t, c, controller.Config{})
		require.NoError(t, i.ctl.Ready())

		assert.Equal(t, int32(8), c.replicas("web"))
		assert.Equal(t, 1, c.successfulPatches())
		d, err := c.deployment("web")
		require.NoError(t, err)
		last, err := time.Parse(time.RFC3339Nano, d.Annotations[controller.AnnotationLastScale])
		require.NoError(t, err, "last-scale is written with the replica change")
		assert.WithinDuration(t, time.Now(), last, time.Second)
		assert.Equal(t, int64(2), d.Generation)
		assert.Len(t, c.events(controller.ReasonScaledUp), 1)
		assert.Equal(t, 1.0, metric(t, i.ctl.Registry(), "converge_scaler_scale_actions_total"))
	})
}

func TestScalesOneReplicaWithNoneReady(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    *appsv1.Deployment
	}{
		{"replicas 1", deployment("web", 1)},
		{"nil replicas means 1", deployment("web", 0, nilReplicas())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, objects([]runtime.Object{tt.d}, pods("web", 1, 0))...)
				start(t, c, controller.Config{})
				assert.Equal(t, int32(2), c.replicas("web"))
			})
		})
	}
}

func TestReactsToPodsTurningUnreadyWithoutDeploymentChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 4))...)
		start(t, c, controller.Config{})
		require.Equal(t, 0, len(c.patchCalls()), "all ready: nothing to do")

		before, err := c.deployment("web")
		require.NoError(t, err)
		for _, p := range []string{"web-0", "web-1", "web-2"} {
			c.setReady(p, false)
		}
		synctest.Wait()

		after, err := c.deployment("web")
		require.NoError(t, err)
		assert.Equal(t, int32(8), *after.Spec.Replicas)
		require.Len(t, c.patchCalls(), 1)
		assert.Equal(t, before.ResourceVersion, patchedRV(t, c.patchCalls()[0]),
			"the decision was made on the Deployment as it was; only pods changed")
	})
}

func TestDoesNotDecideOnStateItJustReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 4))...)
		deployWatch := c.faultWatches(deploymentsGVR)
		start(t, c, controller.Config{})

		// The scaler's own write is slow to reach its cache while pods keep
		// changing: it must not decide again on the version it replaced.
		deployWatch.hold()
		for _, p := range []string{"web-0", "web-1", "web-2", "web-3"} {
			c.setReady(p, false)
			synctest.Wait()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Len(t, c.patchCalls(), 1, "one write, no stale second decision")

		deployWatch.release()
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"))
		assert.Len(t, c.patchCalls(), 1)
	})
}

func TestReadyPodsAreCountedBySelector(t *testing.T) {
	both := map[string]string{"app": "web", "tier": "front"}
	for _, tt := range []struct {
		name     string
		selector *metav1.LabelSelector
	}{
		{"matchLabels", &metav1.LabelSelector{MatchLabels: both}},
		{"matchExpressions", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front"}},
		}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				withLabels := func(p *corev1.Pod, l map[string]string) *corev1.Pod { p.Labels = l; return p }
				terminating := withLabels(pod("web-terminating", "web", true), both)
				terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				terminating.Finalizers = []string{"example.com/hold"}
				elsewhere := withLabels(pod("web-elsewhere", "web", true), both)
				elsewhere.Namespace = "other"
				c := newCluster(t,
					deployment("web", 5, withSelector(tt.selector)),
					withLabels(pod("web-a", "web", true), both),
					withLabels(pod("web-b", "web", true), both),
					withLabels(pod("web-c", "web", false), both),
					withLabels(pod("web-back-1", "web", true), map[string]string{"app": "web", "tier": "back"}),
					withLabels(pod("web-back-2", "web", true), map[string]string{"app": "web"}),
					terminating, elsewhere)
				start(t, c, controller.Config{})
				// Counted: web-a and web-b. Not: unready, other tier or no
				// tier, terminating, other namespace. 2*2 < 5.
				assert.Equal(t, int32(10), c.replicas("web"))
			})
		})
	}
}

func TestStopsAtMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4, withMax("6"))}, pods("web", 4, 0))...)
		start(t, c, controller.Config{})
		assert.Equal(t, int32(6), c.replicas("web"), "min(2*4, 6)")

		c.observe("web")
		time.Sleep(2 * controller.DefaultCooldown)
		synctest.Wait()
		assert.Equal(t, int32(6), c.replicas("web"))
		assert.Equal(t, 1, c.successfulPatches(), "at max: never touched again")
	})
}

func TestDoesNotRunAwayWhileNewPodsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
		start(t, c, controller.Config{})
		require.Equal(t, int32(4), c.replicas("web"))

		// The Deployment controller catches up and creates two pods; they
		// take 20s to become ready, less than the cooldown.
		time.Sleep(time.Second)
		c.observe("web")
		c.create(pod("web-2", "web", false))
		c.create(pod("web-3", "web", false))
		synctest.Wait()
		time.Sleep(19 * time.Second)
		c.setReady("web-2", true)
		c.setReady("web-3", true)
		synctest.Wait()

		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Equal(t, int32(4), c.replicas("web"), "2 of 4 ready: the first doubling was enough")
		assert.Equal(t, 1, c.successfulPatches())
	})
}

func TestWaitsForObservedGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
		start(t, c, controller.Config{})
		require.Equal(t, int32(4), c.replicas("web"))

		// Generation 2 is not observed: however long it takes and however
		// unready the pods, the scaler does not act on a spec nobody has
		// rolled out yet.
		time.Sleep(10 * controller.DefaultCooldown)
		synctest.Wait()
		assert.Equal(t, 1, c.successfulPatches())

		// Observed, cooldown long over, still 0 of 4 ready: the next doubling.
		c.observe("web")
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"))
	})
}

func TestCooldownDelaysTheNextScale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
		const cooldown = 45 * time.Second
		i := start(t, c, controller.Config{Cooldown: cooldown})
		first := time.Now()
		require.Equal(t, int32(4), c.replicas("web"))

		// Observed at once, but the new pods never become ready: the next
		// doubling waits for the cooldown, and no longer.
		time.Sleep(time.Second)
		c.observe("web")
		synctest.Wait()
		assert.Equal(t, int32(4), c.replicas("web"), "inside the cooldown")

		var second time.Time
		for c.replicas("web") == 4 && time.Since(first) < time.Hour {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			second = time.Now()
		}
		assert.Equal(t, int32(8), c.replicas("web"))
		assert.InDelta(t, cooldown.Seconds(), second.Sub(first).Seconds(), 0.2, "acts when the cooldown ends")
		assert.Equal(t, 1.0, metric(t, i.ctl.Registry(), "converge_scaler_reconciles_total", "result", "requeue"),
			"one wait for the rest of the cooldown, no polling")
	})
}

func TestLeavesUnlabelledDeploymentsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects(
			[]runtime.Object{deployment("plain", 2, unlabelled()), deployment("web", 2)},
			pods("plain", 2, 0), pods("web", 2, 0))...)
		start(t, c, controller.Config{})

		assert.Equal(t, int32(4), c.replicas("web"), "the scaler is working")
		assert.Equal(t, int32(2), c.replicas("plain"))
		for _, p := range c.patchCalls() {
			assert.NotEqual(t, "plain", p.Name)
		}

		// Opting in later is noticed.
		c.updateDeployment("plain", func(d *appsv1.Deployment) { d.Labels[controller.LabelEnabled] = controller.ValueEnabled })
		synctest.Wait()
		assert.Equal(t, int32(4), c.replicas("plain"))
	})
}

func TestTombstoneDeleteIsHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 3)}, pods("web", 3, 2))...)
		faults := c.faultWatches(corev1.SchemeGroupVersion.WithResource("pods"))
		start(t, c, controller.Config{})
		require.Equal(t, 0, len(c.patchCalls()), "2 of 3 ready is enough")

		// The DELETED event of a ready pod is lost: the cache still counts it.
		faults.dropDeleteOf("web-0")
		require.NoError(t, c.cs.CoreV1().Pods(ns).Delete(context.Background(), "web-0", metav1.DeleteOptions{}))
		synctest.Wait()
		require.Equal(t, 0, len(c.patchCalls()), "the delete was not seen")

		// The watch expires; the relist no longer holds web-0, so the
		// informer hands DeleteFunc a DeletedFinalStateUnknown.
		watches := faults.watchCount()
		faults.expire()
		time.Sleep(time.Minute) // past the reflector's backoff
		synctest.Wait()
		assert.Greater(t, faults.watchCount(), watches, "the reflector relisted and watched again")
		assert.Equal(t, int32(6), c.replicas("web"), "the tombstone enqueued the Deployment: 1 of 3 ready")
	})
}

func TestConflictRecomputesOnFreshState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 1))...)
		// A second writer lowers the ceiling just before the scaler's first
		// write lands: that write carries the old resourceVersion and gets 409.
		var once sync.Once
		c.setBeforePatch(func(name string, _ []byte) error {
			once.Do(func() {
				d, err := c.deployment(name)
				if err != nil {
					return
				}
				d = d.DeepCopy()
				d.Annotations[controller.AnnotationMaxReplicas] = "5"
				d.Labels["team"] = "payments"
				d.ResourceVersion = c.nextRV()
				_ = c.cs.Tracker().Update(deploymentsGVR, d, ns)
			})
			return nil
		})
		i := start(t, c, controller.Config{})

		calls := c.patchCalls()
		require.Len(t, calls, 2)
		assert.True(t, apierrors.IsConflict(calls[0].Err), "first write loses: %v", calls[0].Err)
		assert.NoError(t, calls[1].Err)
		assert.NotEqual(t, patchedRV(t, calls[0]), patchedRV(t, calls[1]), "the retry carries the fresh resourceVersion")
		assert.Equal(t, int32(5), c.replicas("web"), "decided again on fresh state: min(8, new max 5), not the stale 8")
		assert.Equal(t, 1.0, metric(t, i.ctl.Registry(), "workqueue_retries_total", "name", "scaler"))
		d, err := c.deployment("web")
		require.NoError(t, err)
		assert.Equal(t, "payments", d.Labels["team"], "the other writer's change survives")
	})
}

func TestConflictAfterRetriesIsRetriedWhenFreshStateArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 1))...)
		// Every write fails with 409 until the cache has seen a newer version.
		var blocked = true
		var mu sync.Mutex
		c.setBeforePatch(func(name string, _ []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if blocked {
				return apierrors.NewConflict(deploymentsGVR.GroupResource(), name, errors.New("injected"))
			}
			return nil
		})
		i := start(t, c, controller.Config{MaxRetries: 2})
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, 1.0, metric(t, i.ctl.Registry(), "converge_scaler_retries_exhausted_total"))
		require.Equal(t, int32(4), c.replicas("web"))

		// A change the update filter would ignore (a label it does not read)
		// is still the fresh state the lost write asked for.
		mu.Lock()
		blocked = false
		mu.Unlock()
		c.updateDeployment("web", func(d *appsv1.Deployment) { d.Labels["team"] = "payments" })
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"))
	})
}

func TestInvalidInputGivesOneEventAndNoRetries(t *testing.T) {
	for _, tt := range []struct {
		name   string
		d      *appsv1.Deployment
		reason string
	}{
		{"max not a number", deployment("web", 2, withMax("ten")), controller.ReasonInvalidMaxReplicas},
		{"max zero", deployment("web", 2, withMax("0")), controller.ReasonInvalidMaxReplicas},
		{"max negative", deployment("web", 2, withMax("-3")), controller.ReasonInvalidMaxReplicas},
		{"max overflows int32", deployment("web", 2, withMax("99999999999")), controller.ReasonInvalidMaxReplicas},
		{"bad selector operator", deployment("web", 2, withSelector(&metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"web"}}},
		})), controller.ReasonInvalidSelector},
		{"nil selector", deployment("web", 2, withSelector(nil)), controller.ReasonInvalidSelector},
		{"empty selector", deployment("web", 2, withSelector(&metav1.LabelSelector{})), controller.ReasonInvalidSelector},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, objects([]runtime.Object{tt.d}, pods("web", 2, 0))...)
				i := start(t, c, controller.Config{})

				// More reasons to reconcile it: its pods flap.
				for range 3 {
					c.setReady("web-0", true)
					synctest.Wait()
					c.setReady("web-0", false)
					synctest.Wait()
					c.updateDeployment("web", func(d *appsv1.Deployment) { d.Status.ObservedGeneration++ })
					synctest.Wait()
				}
				time.Sleep(time.Hour)
				synctest.Wait()

				events := c.events(tt.reason)
				require.Len(t, events, 1)
				assert.EqualValues(t, 1, events[0].Count, "one Warning Event, however often it is reconciled")
				assert.Empty(t, c.patchCalls(), "left alone")
				assert.Zero(t, metric(t, i.ctl.Registry(), "workqueue_retries_total", "name", "scaler"), "no retries")
				assert.GreaterOrEqual(t, metric(t, i.ctl.Registry(), "converge_scaler_reconciles_total", "result", "permanent_error"), 2.0)

				// Fixed by its owner: the scaler acts.
				c.updateDeployment("web", func(d *appsv1.Deployment) {
					d.Annotations[controller.AnnotationMaxReplicas] = "10"
					d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
				})
				synctest.Wait()
				c.observe("web")
				synctest.Wait()
				assert.Equal(t, int32(4), c.replicas("web"))
			})
		})
	}
}

func TestErrorsAreClassified(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tt := range []struct {
		name   string
		err    error
		writes int // patch attempts, including the one that lands
		result int32
	}{
		{"429 retried", apierrors.NewTooManyRequests("slow down", 1), 2, 8},
		{"500 retried", apierrors.NewInternalError(errors.New("etcd hiccup")), 2, 8},
		{"503 retried", apierrors.NewServiceUnavailable("restarting"), 2, 8},
		{"timeout retried", apierrors.NewTimeoutError("slow", 1), 2, 8},
		{"transport error retried", fmt.Errorf("dial tcp 127.0.0.1:6443: connect: connection refused"), 2, 8},
		{"invalid not retried", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", nil), 1, 4},
		{"not found is done", apierrors.NewNotFound(gr, "web"), 1, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 0))...)
				var attempts int
				var mu sync.Mutex
				c.setBeforePatch(func(string, []byte) error {
					mu.Lock()
					defer mu.Unlock()
					attempts++
					if attempts == 1 {
						return tt.err
					}
					return nil
				})
				i := start(t, c, controller.Config{})
				time.Sleep(time.Hour)
				synctest.Wait()

				assert.Equal(t, tt.writes, len(c.patchCalls()))
				assert.Equal(t, tt.result, c.replicas("web"))
				assert.Zero(t, metric(t, i.ctl.Registry(), "converge_scaler_retries_exhausted_total"))
			})
		})
	}
}

// TestExhaustedRetriesAreTriedEveryCooldown: an outage longer than the
// quick retries does not lose the Deployment. Nothing else would bring it
// back: its pods never change, so no event comes. A second outage, after a
// success, is reported again.
func TestExhaustedRetriesAreTriedEveryCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const cooldown, outage, second = 30 * time.Second, 100 * time.Second, 140 * time.Second
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 0))...)
		began := time.Now()
		var landed time.Time
		var mu sync.Mutex
		c.setBeforePatch(func(string, []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if since := time.Since(began); since < outage || (since >= second && since < second+outage) {
				return apierrors.NewInternalError(errors.New("down"))
			}
			if landed.IsZero() {
				landed = time.Now()
			}
			return nil
		})
		i := start(t, c, controller.Config{Cooldown: cooldown})
		time.Sleep(outage - time.Second)
		synctest.Wait()
		assert.Equal(t, int32(4), c.replicas("web"), "during the outage")
		// The first try, 5 quick retries (5ms to 80ms), then one try per
		// cooldown: at about 30s, 60s and 90s.
		assert.Len(t, c.patchCalls(), 1+controller.DefaultMaxRetries+3)
		assert.Equal(t, 1.0, metric(t, i.ctl.Registry(), "converge_scaler_retries_exhausted_total"), "counted once per outage")
		assert.Len(t, c.events(controller.ReasonRetriesExhausted), 1, "reported once per outage")

		time.Sleep(cooldown)
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"), "scaled once the API answers again")
		mu.Lock()
		assert.Less(t, landed.Sub(began), outage+cooldown, "within a cooldown of the outage's end")
		mu.Unlock()
		assert.Len(t, c.patchCalls(), 1+controller.DefaultMaxRetries+4)

		// Observed, the next doubling falls due in the second outage.
		c.observe("web")
		time.Sleep(second + outage - time.Since(began) - time.Second)
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"), "during the second outage")
		assert.Equal(t, 2.0, metric(t, i.ctl.Registry(), "converge_scaler_retries_exhausted_total"), "the second outage counts again")
		time.Sleep(cooldown)
		synctest.Wait()
		assert.Equal(t, int32(10), c.replicas("web"), "at the default max once the API answers again")
	})
}

func TestStatusOnlyUpdatesAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 4))...)
		i := start(t, c, controller.Config{})
		reconciles := metric(t, i.ctl.Registry(), "converge_scaler_reconciles_total", "result", "success")
		require.Positive(t, reconciles)

		for n := range int32(5) {
			c.updateDeployment("web", func(d *appsv1.Deployment) {
				d.Status.ReadyReplicas = n
				d.Status.AvailableReplicas = n
			})
		}
		synctest.Wait()
		assert.Equal(t, reconciles, metric(t, i.ctl.Registry(), "converge_scaler_reconciles_total", "result", "success"),
			"replica counts in status do not change the decision")

		c.updateDeployment("web", func(d *appsv1.Deployment) { d.Annotations[controller.AnnotationMaxReplicas] = "20" })
		synctest.Wait()
		assert.Equal(t, reconciles+1, metric(t, i.ctl.Registry(), "converge_scaler_reconciles_total", "result", "success"))
	})
}

func TestShutdownIsOrderedAndBounded(t *testing.T) {
	t.Run("in-flight write finishes within grace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
			entered := make(chan struct{})
			var landed time.Time
			i := startWith(t, c, controller.Config{ShutdownGrace: 10 * time.Second}, func(ctx context.Context, _ string) error {
				close(entered)
				time.Sleep(3 * time.Second) // a slow API server
				landed = time.Now()
				return nil
			})
			<-entered
			require.NoError(t, i.ctl.Ready())

			readyDuringShutdown := make(chan error, 1)
			go func() {
				synctest.Wait() // Run is blocked on the in-flight write
				readyDuringShutdown <- i.ctl.Ready()
			}()
			stopped := time.Now()
			require.NoError(t, i.stop())
			assert.Error(t, <-readyDuringShutdown, "not ready first")
			assert.True(t, landed.After(stopped), "the write was still in flight at the stop")
			assert.Equal(t, landed, time.Now(), "Run returned as the write landed: it waited for it, no longer")
			assert.Equal(t, int32(4), c.replicas("web"), "the in-flight write landed")
		})
	})
	t.Run("stuck write is cancelled at the grace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
			entered := make(chan struct{})
			i := startWith(t, c, controller.Config{ShutdownGrace: 10 * time.Second}, func(ctx context.Context, _ string) error {
				close(entered)
				<-ctx.Done() // hangs until cancelled
				return ctx.Err()
			})
			<-entered
			stopped := time.Now()
			err := i.stop()
			assert.ErrorIs(t, err, controller.ErrShutdownGraceExceeded)
			assert.Equal(t, 10*time.Second, time.Since(stopped), "returns at the grace")
			assert.Equal(t, int32(2), c.replicas("web"))
		})
	})
}

func TestReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, deployment("web", 1))
		ctl, err := controller.New(controller.Config{}, c.cs)
		require.NoError(t, err)
		srv := ctl.HealthHandler()
		assert.Error(t, ctl.Ready(), "not started")
		assert.Equal(t, http.StatusServiceUnavailable, probeCode(srv, "/readyz"))
		assert.Equal(t, http.StatusOK, probeCode(srv, "/healthz"))

		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctl.Run(ctx) }()
		waitReady(t, ctl)
		assert.NoError(t, ctl.Ready())
		assert.Equal(t, http.StatusOK, probeCode(srv, "/readyz"))
		cancel()
		require.NoError(t, <-done)
		assert.Error(t, ctl.Ready())
		assert.ErrorContains(t, ctl.Run(context.Background()), "twice")
	})
}

func probeCode(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

func TestNewValidatesConfig(t *testing.T) {
	c := newCluster(t)
	for _, tt := range []struct {
		name string
		cfg  controller.Config
		msg  string
	}{
		{"negative workers", controller.Config{Workers: -1}, "workers"},
		{"negative cooldown", controller.Config{Cooldown: -time.Second}, "cooldown"},
		{"bad namespace", controller.Config{Namespace: "Not_A_Namespace"}, "namespace"},
		{"election without identity", controller.Config{LeaderElection: &controller.LeaderElectionConfig{Namespace: "kube-system"}}, "identity"},
		{"election without namespace", controller.Config{LeaderElection: &controller.LeaderElectionConfig{Identity: "a"}}, "namespace is required"},
		{"lease not longer than renew", controller.Config{LeaderElection: &controller.LeaderElectionConfig{
			Namespace: "ns", Identity: "a", LeaseDuration: 5 * time.Second, RenewDeadline: 5 * time.Second}}, "lease duration"},
		{"renew too short for retry", controller.Config{LeaderElection: &controller.LeaderElectionConfig{
			Namespace: "ns", Identity: "a", RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}}, "1.2 x retry period"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := controller.New(tt.cfg, c.cs)
			assert.ErrorContains(t, err, tt.msg)
		})
	}
	_, err := controller.New(controller.Config{}, nil)
	assert.ErrorContains(t, err, "client is nil")
}

// patchedRV is the resourceVersion a scaler write was conditional on.
func patchedRV(t *testing.T, p patchCall) string {
	t.Helper()
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	require.NoError(t, jsonUnmarshal(p.Patch, &body))
	require.NotEmpty(t, body.Metadata.ResourceVersion, "every write carries the resourceVersion it decided on")
	return body.Metadata.ResourceVersion
}
