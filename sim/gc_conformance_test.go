package sim_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/world"
)

// TestConformanceGarbageCollection: ownerReferences cascade on every
// backend, for the three propagation policies.
func TestConformanceGarbageCollection(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		cms := env.Observer.CoreV1().ConfigMaps(env.Namespace)
		owned := func(owner, name string, block bool, finalizers ...string) *corev1.ConfigMap {
			o, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner}}, metav1.CreateOptions{})
			require.NoError(t, err)
			d, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: name, Finalizers: finalizers,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: o.UID, BlockOwnerDeletion: ptr.To(block)}},
			}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return d
		}
		gone := func(name string) bool {
			_, err := cms.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}

		// Background: the owner goes at once, its dependent after.
		owned("bg-owner", "bg-dependent", false)
		require.NoError(t, cms.Delete(ctx, "bg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		assert.True(t, gone("bg-owner"))
		eventually(t, func() bool { return gone("bg-dependent") }, "the dependent of a deleted owner is collected")

		// Foreground: the owner waits for its blocking dependent.
		owned("fg-owner", "fg-dependent", true, "example.com/hold")
		require.NoError(t, cms.Delete(ctx, "fg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
		owner, err := cms.Get(ctx, "fg-owner", metav1.GetOptions{})
		require.NoError(t, err, "the owner waits")
		assert.NotNil(t, owner.DeletionTimestamp)
		assert.Contains(t, owner.Finalizers, metav1.FinalizerDeleteDependents)
		eventually(t, func() bool {
			d, err := cms.Get(ctx, "fg-dependent", metav1.GetOptions{})
			return err == nil && d.DeletionTimestamp != nil
		}, "the dependent is being deleted")
		_, err = cms.Get(ctx, "fg-owner", metav1.GetOptions{})
		require.NoError(t, err, "the owner still waits for its blocking dependent")
		_, err = cms.Patch(ctx, "fg-dependent", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, func() bool { return gone("fg-dependent") && gone("fg-owner") }, "the dependent, then the owner, go")

		// Orphan: the dependent stays, without the reference.
		owned("orphan-owner", "orphan-dependent", false)
		require.NoError(t, cms.Delete(ctx, "orphan-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
		eventually(t, func() bool { return gone("orphan-owner") }, "the owner goes")
		d, err := cms.Get(ctx, "orphan-dependent", metav1.GetOptions{})
		require.NoError(t, err, "the orphan stays")
		assert.Empty(t, d.OwnerReferences)
	})
}

// TestConformanceNamespaceDeletion: a deleted namespace is Terminating
// until its contents are gone, refuses new ones meanwhile, then goes.
func TestConformanceNamespaceDeletion(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		name := env.Namespace + "-doomed"
		namespaces := env.Observer.CoreV1().Namespaces()
		_, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cms := env.Observer.CoreV1().ConfigMaps(name)
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
		require.NoError(t, err)

		require.NoError(t, namespaces.Delete(ctx, name, metav1.DeleteOptions{}))
		ns, err := namespaces.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "no new content in a terminating namespace: %v", err)

		eventually(t, func() bool {
			_, err := cms.Get(ctx, "plain", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "its contents are deleted")
		held, err := cms.Get(ctx, "held", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, held.DeletionTimestamp)
		_, err = namespaces.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "a finalizer inside holds the namespace")

		_, err = cms.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, func() bool {
			_, err := namespaces.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "the namespace goes once empty")
	})
}
