package mirror_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
)

// exposer runs a scenario against a controller with bug planted (or none)
// and returns the bug's symptom as seen, or "" when the run was correct.
type exposer func(t *testing.T, bug mirror.Bug) (symptom string)

// exposers hold a scenario per bug; every bug must have one.
var exposers = map[mirror.Bug]exposer{
	mirror.BugNoSourceWatch:    exposeNoSourceWatch,
	mirror.BugOrphanTargets:    exposeOrphanTargets,
	mirror.BugStaleStatus:      exposeStaleStatus,
	mirror.BugRetryNoBackoff:   exposeRetryNoBackoff,
	mirror.BugTombstonePanic:   exposeTombstonePanic,
	mirror.BugStatusFromCache:  exposeStatusFromCache,
	mirror.BugDeleteByName:     exposeDeleteByName,
	mirror.BugKeptMirrors:      exposeKeptMirrors,
	mirror.BugTombstoneIgnored: exposeTombstonePanic,
	// Taking a target off the list is what shows both.
	mirror.BugRemovedTargetsKept: exposeOrphanTargets,
	mirror.BugFirstTarget:        exposeFirstTarget,
}

// TestEachBugIsExposed runs each bug's scenario twice: the correct
// controller must show no symptom, the one with the bug must.
func TestEachBugIsExposed(t *testing.T) {
	for _, b := range mirror.Bugs() {
		expose, ok := exposers[b.Name]
		require.True(t, ok, "no scenario exposes %s", b.Name)
		t.Run(string(b.Name), func(t *testing.T) {
			t.Run("correct", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					assert.Empty(t, expose(t, ""))
				})
			})
			t.Run("with the bug", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					symptom := expose(t, b.Name)
					assert.NotEmpty(t, symptom, "%s went unnoticed", b.Name)
					t.Log(symptom)
				})
			})
		})
	}
}

// synced starts a controller with bug and faults and a Mirror "m" of
// "settings" into copy-a and copy-b, and waits until both hold its data,
// the status says so and the controller is idle: what the scenario does
// next is then the only cause of what follows.
func synced(t *testing.T, bug mirror.Bug, faults ...chaos.Injection) (*testEnv, *instance) {
	t.Helper()
	e := start(t)
	inst := e.run(mirror.Config{Bug: bug}, faults...)
	src := e.createConfigMap("settings", blue)
	e.createMirror("m", "settings", "copy-a", "copy-b")
	e.waitFor("the targets hold the source's data", e.holds(blue, "copy-a", "copy-b"))
	e.waitFor("the status reports them", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))
	e.idle(inst)
	return e, inst
}

// failUpdates answers every update of the ConfigMap name with a 500. The
// targets' creation is not affected.
func failUpdates(name string) chaos.Injection {
	return chaos.Injection{Fault: chaos.ServerError(chaos.Target{Verbs: []string{"update"}, Resource: "configmaps", Name: name}, 500, 0)}
}

func exposeNoSourceWatch(t *testing.T, bug mirror.Bug) string {
	e, _ := synced(t, bug)
	e.setData("settings", green)
	if !eventually(time.Minute, e.holds(green, "copy-a", "copy-b")) {
		return "a minute after the source changed, the targets still hold its old data"
	}
	return ""
}

func exposeOrphanTargets(t *testing.T, bug mirror.Bug) string {
	e, _ := synced(t, bug)
	var symptoms []string
	e.setTargets("m", "copy-a")
	if !eventually(time.Minute, e.gone("copy-b")) {
		symptoms = append(symptoms, "copy-b is still there a minute after the Mirror stopped listing it")
	}
	require.NoError(t, e.mirrors.ExamplesV1alpha1().Mirrors(ns).Delete(context.Background(), "m", metav1.DeleteOptions{}))
	if !eventually(time.Minute, e.gone("copy-a")) {
		symptoms = append(symptoms, "copy-a outlived its Mirror by a minute")
	}
	return strings.Join(symptoms, "; ")
}

func exposeStaleStatus(t *testing.T, bug mirror.Bug) string {
	e, _ := synced(t, bug, failUpdates("copy-b"))
	src := e.setData("settings", green)
	e.waitFor("the status describes the new source", func() bool {
		return e.mirror("m").Status.SourceResourceVersion == src.ResourceVersion
	})
	m := e.mirror("m")
	if c := e.syncedCondition("m"); c.Status == metav1.ConditionTrue && !e.holds(green, "copy-b")() {
		return fmt.Sprintf("status says Synced=True with %d targets synced while copy-b's update fails", m.Status.SyncedTargets)
	}
	return ""
}

func exposeRetryNoBackoff(t *testing.T, bug mirror.Bug) string {
	e, inst := synced(t, bug, failUpdates("copy-b"))
	_, _, before := inst.ctl.Probe()
	e.setData("settings", green)
	time.Sleep(time.Minute) // the window the retries are counted over
	_, _, after := inst.ctl.Probe()
	// Backoff from 5ms doubling fits about 14 tries in a minute; the rest
	// are events. Without it, only the client's rate limit (5/s) slows the
	// loop.
	n := after - before
	t.Logf("%d reconciles in the minute", n)
	if n > 60 {
		return fmt.Sprintf("%d reconciles in a minute of a persistent error", n)
	}
	return ""
}

// recordPanics lets client-go recover a panic of the controller's, which
// would otherwise end the test binary, and returns what it recovered so
// far. Call it before the controller starts, so that it is restored last.
func recordPanics(t *testing.T) func() []any {
	var mu sync.Mutex
	var panics []any
	reallyCrash, handlers := utilruntime.ReallyCrash, utilruntime.PanicHandlers
	utilruntime.ReallyCrash = false
	utilruntime.PanicHandlers = append(handlers[:len(handlers):len(handlers)], func(_ context.Context, r any) {
		mu.Lock()
		defer mu.Unlock()
		panics = append(panics, r)
	})
	t.Cleanup(func() { utilruntime.ReallyCrash, utilruntime.PanicHandlers = reallyCrash, handlers })
	return func() []any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(panics)
	}
}

// exposeFirstTarget takes every target off the Mirror's list: the
// targets are optional, and a Mirror that lists none is synced like any.
func exposeFirstTarget(t *testing.T, bug mirror.Bug) string {
	panics := recordPanics(t)
	e, _ := synced(t, bug)
	e.setTargets("m")
	gone := eventually(time.Minute, func() bool { return e.gone("copy-a")() && e.gone("copy-b")() })
	switch {
	case len(panics()) > 0:
		return fmt.Sprintf("the sync panicked: %v", panics()[0])
	case !gone:
		return "the targets were still there a minute after the Mirror stopped listing them"
	}
	return ""
}

func exposeTombstonePanic(t *testing.T, bug mirror.Bug) string {
	panics := recordPanics(t)
	// The controller's watch loses copy-a's DELETED event and expires: its
	// informer learns of the delete from the relist, as a tombstone.
	e, inst := synced(t, bug, chaos.Injection{Fault: chaos.Tombstone(chaos.Target{Resource: "configmaps", Name: "copy-a"})})
	require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "copy-a", metav1.DeleteOptions{}))
	recreated := eventually(time.Minute, e.holds(blue, "copy-a"))
	require.True(t, slices.ContainsFunc(inst.firings.Firings(), func(f chaos.Firing) bool { return f.Fault == "tombstone" }),
		"the DELETED event was dropped")
	switch {
	case len(panics()) > 0:
		return fmt.Sprintf("the delete handler panicked: %v", panics()[0])
	case !recreated:
		return "copy-a was not recreated a minute after its delete"
	}
	return ""
}

// exposeStatusFromCache keeps a copy of each Mirror as the informers store
// it (their transform) and, once the status has followed a change of the
// source, looks for one that no longer equals its copy.
func exposeStatusFromCache(t *testing.T, bug mirror.Bug) string {
	var mu sync.Mutex
	type stored struct{ obj, copy *v1alpha1.Mirror }
	var seen []stored
	keep := func(obj any) (any, error) {
		if m, ok := obj.(*v1alpha1.Mirror); ok {
			mu.Lock()
			seen = append(seen, stored{m, m.DeepCopy()})
			mu.Unlock()
		}
		return obj, nil
	}
	e := start(t)
	inst := e.run(mirror.Config{Bug: bug, CacheTransform: keep})
	src := e.createConfigMap("settings", blue)
	e.createMirror("m", "settings", "copy-a", "copy-b")
	e.waitFor("the status reports the targets", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))
	e.idle(inst)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if !reflect.DeepEqual(s.obj.Status, s.copy.Status) {
			return fmt.Sprintf("the Mirror %s at resourceVersion %s changed in the informer's cache: status.syncedTargets %d, was %d",
				s.obj.Name, s.obj.ResourceVersion, s.obj.Status.SyncedTargets, s.copy.Status.SyncedTargets)
		}
	}
	return ""
}

// exposeDeleteByName: someone replaces copy-b with a ConfigMap of their own
// while the controller's cache lags (copy-b's watch events reach it 30 s
// late), and the Mirror stops listing copy-b. Deleting what its cache
// holds by name removes the replacement; with the UID precondition the
// server refuses.
func exposeDeleteByName(t *testing.T, bug mirror.Bug) string {
	start := time.Now()
	lag := chaos.Injection{Fault: chaos.WatchDelay(chaos.Target{Resource: "configmaps", Name: "copy-b"}, 30*time.Second), When: chaos.When{After: time.Minute}}
	e, _ := synced(t, bug, lag)
	require.Less(t, time.Since(start), time.Minute, "synced before the cache starts to lag")
	time.Sleep(time.Until(start.Add(time.Minute))) // virtual time: the lag begins
	require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "copy-b", metav1.DeleteOptions{}))
	theirs := e.createConfigMap("copy-b", green)
	e.setTargets("m", "copy-a")
	time.Sleep(time.Minute) // past the lag: every event has arrived and been acted on
	switch cm := e.configMap("copy-b"); {
	case cm == nil:
		return "the copy-b someone else created after the Mirror stopped listing it was deleted"
	case cm.UID != theirs.UID:
		return fmt.Sprintf("copy-b is not the one someone else created (UID %s, not %s)", cm.UID, theirs.UID)
	}
	return ""
}

// exposeKeptMirrors: the Mirror is deleted, and the garbage collector
// deletes its targets; a second later, no target may be created any more.
// (In the instant of the deletion, a pass that read the Mirror before its
// informer applied the deletion may create one: the collector removes it.)
// Creations are read from a watch: the collector deletes each new target
// at once, so a poll would see none.
func exposeKeptMirrors(t *testing.T, bug mirror.Bug) string {
	e, _ := synced(t, bug)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	list, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := e.kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, e.mirrors.ExamplesV1alpha1().Mirrors(ns).Delete(ctx, "m", metav1.DeleteOptions{}))
	settled := time.Now().Add(time.Second)
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return ""
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if isCM && ev.Type == watch.Added && (cm.Name == "copy-a" || cm.Name == "copy-b") && time.Now().After(settled) {
				return fmt.Sprintf("%s was created again %v after its Mirror was deleted", cm.Name, time.Since(settled.Add(-time.Second)))
			}
		case <-deadline:
			return ""
		}
	}
}
