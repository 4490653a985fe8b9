package mirror_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
)

var (
	blue  = map[string]string{"color": "blue"}
	green = map[string]string{"color": "green", "size": "L"}
)

func TestMirrorKeepsTargetsEqualToTheSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		e.run(mirror.Config{})
		src := e.createConfigMap("settings", blue)
		m := e.createMirror("m", "settings", "copy-a", "copy-b")

		e.waitFor("the targets hold the source's data", e.holds(blue, "copy-a", "copy-b"))
		for _, name := range []string{"copy-a", "copy-b"} {
			ref := metav1.GetControllerOf(e.configMap(name))
			require.NotNil(t, ref, "%s has a controller", name)
			assert.Equal(t, m.UID, ref.UID, "%s is controlled by the Mirror", name)
			assert.Equal(t, "examples.converge.dev/v1alpha1", ref.APIVersion)
			assert.Equal(t, "Mirror", ref.Kind)
		}
		e.waitFor("the status reports both targets synced", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))

		src = e.setData("settings", green)
		e.waitFor("the change reaches the targets", e.holds(green, "copy-a", "copy-b"))
		e.waitFor("the status follows the source", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))

		e.setTargets("m", "copy-a")
		e.waitFor("the removed target is deleted", e.gone("copy-b"))
		e.waitFor("the status counts one target", e.reports("m", src.ResourceVersion, 1, metav1.ConditionTrue, v1alpha1.ReasonSynced))

		require.NoError(t, e.mirrors.ExamplesV1alpha1().Mirrors(ns).Delete(context.Background(), "m", metav1.DeleteOptions{}))
		e.waitFor("the garbage collector deletes the remaining target", e.gone("copy-a"))
		assert.NotNil(t, e.configMap("settings"), "the source is not the Mirror's")
	})
}

func TestMissingSourceTouchesNoTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		e.run(mirror.Config{})
		e.createMirror("m", "settings", "copy")
		e.waitFor("the status reports the missing source", e.reports("m", "", 0, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound))
		assert.Nil(t, e.configMap("copy"), "no target without a source")

		// The source's creation enqueues the Mirror through the source index.
		src := e.createConfigMap("settings", blue)
		e.waitFor("the target is created", e.holds(blue, "copy"))
		e.waitFor("the status reports it", e.reports("m", src.ResourceVersion, 1, metav1.ConditionTrue, v1alpha1.ReasonSynced))

		require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "settings", metav1.DeleteOptions{}))
		e.waitFor("the status reports the source gone", e.reports("m", "", 0, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound))
		assert.True(t, e.holds(blue, "copy")(), "the target keeps its data")
	})
}

func TestTargetOwnedBySomeoneElseIsLeftAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		e.run(mirror.Config{})
		src := e.createConfigMap("settings", blue)
		theirs := e.createConfigMap("theirs", green)
		e.createMirror("m", "settings", "theirs", "copy")

		e.waitFor("the status reports the ConfigMap in the way", e.reports("m", src.ResourceVersion, 1, metav1.ConditionFalse, v1alpha1.ReasonTargetNotOwned))
		assert.True(t, e.holds(blue, "copy")(), "the other target is synced")
		now := e.configMap("theirs")
		assert.Equal(t, theirs.ResourceVersion, now.ResourceVersion, "not written")
		assert.Empty(t, now.OwnerReferences, "not adopted")

		// Its deletion enqueues the Mirror through the target index.
		require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "theirs", metav1.DeleteOptions{}))
		e.waitFor("the target is created", e.holds(blue, "theirs", "copy"))
		e.waitFor("the status reports both", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))
	})
}

func TestFailedTargetWriteIsReportedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		failing := chaos.Injection{
			Fault: chaos.ServerError(chaos.Target{Verbs: []string{"update"}, Resource: "configmaps", Name: "copy-b"}, 500, 0),
			When:  chaos.When{Count: 8},
		}
		inst := e.run(mirror.Config{}, failing)
		e.createConfigMap("settings", blue)
		e.createMirror("m", "settings", "copy-a", "copy-b")
		e.waitFor("the targets are created", e.holds(blue, "copy-a", "copy-b"))

		src := e.setData("settings", green)
		e.waitFor("the status reports the failing target", e.reports("m", src.ResourceVersion, 1, metav1.ConditionFalse, v1alpha1.ReasonTargetWriteFailed))
		assert.Contains(t, e.syncedCondition("m").Message, "copy-b")
		assert.False(t, e.holds(green, "copy-b")())

		// Eight failures, retried with a backoff from 5ms doubling, are
		// over in about a second; the ninth write lands.
		e.waitFor("the retry lands", e.holds(green, "copy-a", "copy-b"))
		e.waitFor("the status recovers", e.reports("m", src.ResourceVersion, 2, metav1.ConditionTrue, v1alpha1.ReasonSynced))
		_, _, reconciles := inst.ctl.Probe()
		assert.Less(t, reconciles, int64(30), "backoff, not a hot loop")
	})
}

func TestSchemaRejectsInvalidMirrors(t *testing.T) {
	many := make([]string, v1alpha1.MaxTargets+1)
	for i := range many {
		many[i] = "copy-" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		name   string
		mirror *v1alpha1.Mirror
		want   string // in the 422's message
	}{
		{"no source", newMirror("m", "", "copy"), "spec.source"},
		{"the source as a target", newMirror("m", "settings", "copy", "settings"), "targets must not include the source"},
		{"a target twice", newMirror("m", "settings", "copy", "copy"), "Duplicate value"},
		{"too many targets", newMirror("m", "settings", many...), "must have at most 20 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := start(t)
				_, err := e.mirrors.ExamplesV1alpha1().Mirrors(ns).Create(context.Background(), tc.mirror, metav1.CreateOptions{})
				require.Error(t, err)
				assert.True(t, apierrors.IsInvalid(err), "422, got %v", err)
				assert.Contains(t, err.Error(), tc.want)
			})
		})
	}
	t.Run("a valid one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := start(t)
			_, err := e.mirrors.ExamplesV1alpha1().Mirrors(ns).Create(context.Background(), newMirror("m", "settings", many[:v1alpha1.MaxTargets]...), metav1.CreateOptions{})
			require.NoError(t, err)
		})
	})
}

func TestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		inst := e.run(mirror.Config{})
		depth, busy, reconciles := inst.ctl.Probe()
		assert.Zero(t, depth)
		assert.False(t, busy)
		assert.Zero(t, reconciles)

		e.createConfigMap("settings", blue)
		e.createMirror("m", "settings", "copy")
		e.waitFor("synced", e.holds(blue, "copy"))
		synctest.Wait()
		depth, busy, reconciles = inst.ctl.Probe()
		assert.Zero(t, depth, "idle once synced")
		assert.False(t, busy)
		assert.Positive(t, reconciles)
	})
}
