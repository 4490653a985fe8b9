package sim_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/world"
)

// managers lists an object's managedFields as "manager operation".
func managers(cm *corev1.ConfigMap) []string {
	var out []string
	for _, m := range cm.ManagedFields {
		out = append(out, m.Manager+" "+string(m.Operation))
	}
	return out
}

// TestConformanceServerSideApply: apply creates, a second manager's apply
// of a field the first owns conflicts (409 with the causes), force takes
// it, and a manager that updates the field conflicts with the next apply.
func TestConformanceServerSideApply(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		c, err := kubernetes.NewForConfig(env.RESTConfig)
		require.NoError(t, err)
		cms := c.CoreV1().ConfigMaps(env.Namespace)
		apply := func(manager string, force bool, data map[string]string) (*corev1.ConfigMap, error) {
			return cms.Apply(ctx, corev1ac.ConfigMap("applied", env.Namespace).WithData(data), metav1.ApplyOptions{FieldManager: manager, Force: force})
		}

		cm, err := apply("mgr-a", false, map[string]string{"a": "1"})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "1"}, cm.Data)
		assert.Equal(t, []string{"mgr-a Apply"}, managers(cm))

		_, err = apply("mgr-b", false, map[string]string{"a": "2"})
		require.True(t, apierrors.IsConflict(err), "another manager's value: %v", err)
		status := err.(apierrors.APIStatus).Status()
		require.NotNil(t, status.Details)
		require.Len(t, status.Details.Causes, 1)
		assert.Equal(t, metav1.CauseTypeFieldManagerConflict, status.Details.Causes[0].Type)
		assert.Equal(t, ".data.a", status.Details.Causes[0].Field)
		assert.Contains(t, status.Details.Causes[0].Message, `conflict with "mgr-a"`)

		cm, err = apply("mgr-b", true, map[string]string{"a": "2"})
		require.NoError(t, err, "force takes the field")
		assert.Equal(t, "2", cm.Data["a"])
		assert.Equal(t, []string{"mgr-b Apply"}, managers(cm), "mgr-a owned nothing else")

		cm.Data["a"] = "3"
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "editor"})
		require.NoError(t, err)
		assert.Equal(t, []string{"editor Update"}, managers(cm), "mgr-b's only field moved to the editor")
		_, err = apply("mgr-b", false, map[string]string{"a": "2"})
		require.True(t, apierrors.IsConflict(err), "the editor owns it now: %v", err)
		assert.Contains(t, err.Error(), `conflict with "editor" using v1`)
	})
}
