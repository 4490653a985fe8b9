package mirror_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/sim"
)

// TestRoleGrantsExactlyWhatIsUsed runs every path of the controller that
// talks to the API and compares what its requests needed with what the Role
// grants: a missing verb is a 403 (checked on every run), an extra one a
// privilege the controller does not need.
func TestRoleGrantsExactlyWhatIsUsed(t *testing.T) {
	objs, err := sim.ReadRBAC("config/rbac")
	require.NoError(t, err)
	granted := map[permission]bool{}
	for _, obj := range objs {
		role, ok := obj.(*rbacv1.Role)
		if !ok {
			continue
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						granted[permission{g, r, v}] = true
					}
				}
			}
		}
	}
	require.NotEmpty(t, granted)

	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		inst := e.run(elected("a"))
		e.createConfigMap("settings", blue)
		e.createMirror("m", "settings", "copy-a", "copy-b")
		e.waitFor("synced", e.holds(blue, "copy-a", "copy-b"))
		e.setData("settings", green)
		e.waitFor("updated", e.holds(green, "copy-a", "copy-b"))
		e.setTargets("m", "copy-a")
		e.waitFor("pruned", e.gone("copy-b"))
		require.NoError(t, e.mirrors.ExamplesV1alpha1().Mirrors(ns).Delete(context.Background(), "m", metav1.DeleteOptions{}))
		e.waitFor("collected", e.gone("copy-a"))
		require.NoError(t, inst.stop()) // releasing the Lease is an update too
		assert.Equal(t, granted, inst.permissions())
	})
}
