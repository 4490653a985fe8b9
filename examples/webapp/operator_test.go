package webapp_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// TestOperator runs the operator as converge runs a controller under test:
// on the fake backend in virtual time, as its ServiceAccount with the Role
// from config/rbac, its cache limited to the run's namespace, the world
// simulator running the pods.
func TestOperator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lifecycle(t, start(t, setup{}), 30*time.Second)
	})
}

// TestOperatorOnEnvtest is TestOperator on a real kube-apiserver, with the
// real Deployment, ReplicaSet and garbage collector controllers, RBAC and
// API defaulting, in real time. It is skipped where the control-plane
// binaries are missing (see sim/envtest).
func TestOperatorOnEnvtest(t *testing.T) {
	lifecycle(t, start(t, setup{envtest: true}), 5*time.Second)
}

// TestLeaderElection: with leader election on, the operator takes the
// Lease in its namespace, converges, and releases the Lease when it stops,
// all within its Role.
func TestLeaderElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, setup{leaderElection: true})
		require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 2, nil)))
		r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
		lease := get(r, "webapp-operator", &coordinationv1.Lease{})
		require.NotNil(t, lease)
		assert.NotEmpty(t, ptr.Deref(lease.Spec.HolderIdentity, ""))

		r.stop()
		lease = get(r, "webapp-operator", &coordinationv1.Lease{})
		assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "released on stop")
		assert.Empty(t, r.meter.forbidden(), "requests the Role does not allow")
	})
}

// lifecycle takes a WebApp through its life. Its children appear and its
// status becomes Available; a change of replicas, port and config reaches
// them; a child deleted behind the operator's back comes back; deleting
// the WebApp deletes them first. The operator writes nothing for quiet once
// converged, never needs a permission its Role lacks, and the run's
// history keeps the invariants.
func lifecycle(t *testing.T, r *run, quiet time.Duration) {
	ctx := context.Background()
	require.NoError(t, r.admin.Create(ctx, r.newWebApp("web", 3, map[string]string{"GREETING": "hello"})))

	r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
	app := r.webApp("web")
	assert.Equal(t, int32(8080), app.Spec.Port, "the schema's default")
	assert.Equal(t, []string{webapp.Finalizer}, app.Finalizers)
	assert.Equal(t, int32(3), app.Status.ReadyReplicas)
	assert.Equal(t, webapp.ConfigHash(map[string]string{"GREETING": "hello"}), app.Status.ConfigHash)
	assert.False(t, conditionTrue(app, v1alpha1.Progressing), "Progressing is False once rolled out")
	checkChildren(t, r, app)

	// Converged: nothing more to write, however long we wait (on fake,
	// virtual time).
	writes := len(r.meter.writes())
	time.Sleep(quiet)
	assert.Empty(t, r.meter.writes()[writes:], "writes after convergence")

	r.edit("web", func(s *v1alpha1.WebAppSpec) {
		s.Replicas = ptr.To[int32](5)
		s.Port = 9090
		s.Config = map[string]string{"GREETING": "bonjour", "LOUD": "yes"}
	})
	r.eventually("the change is rolled out", func() bool {
		app := r.webApp("web")
		return available(app) && app.Generation == 2 && app.Status.ReadyReplicas == 5
	})
	app = r.webApp("web")
	assert.Equal(t, webapp.ConfigHash(app.Spec.Config), app.Status.ConfigHash)
	checkChildren(t, r, app)

	require.NoError(t, r.admin.Delete(ctx, r.configMap("web-config")))
	r.eventually("the ConfigMap is back", func() bool { return r.configMap("web-config") != nil })

	require.NoError(t, r.admin.Delete(ctx, r.webApp("web")))
	r.eventually("the WebApp and its children are gone", func() bool {
		return r.webApp("web") == nil && r.deployment("web") == nil && r.service("web") == nil && r.configMap("web-config") == nil
	})
	// While the world still runs the kubelet that lets them go.
	r.eventually("its pods are gone", func() bool {
		pods := &corev1.PodList{}
		require.NoError(t, r.admin.List(ctx, pods, client.InNamespace(r.ns), client.MatchingLabels{webapp.LabelInstance: "web"}))
		return len(pods.Items) == 0
	})
	r.eventually("the history has the WebApp's deletion", func() bool { return r.history.has("WebApp", "web", watch.Deleted) })

	r.stop()
	assert.NoError(t, observedGenerationNeverDecreases(r.history))
	assert.NoError(t, availableOnlyWhenSeen(r.history))
	assert.NoError(t, childrenGoneBeforeOwner(r.history))
	assert.Empty(t, r.meter.forbidden(), "requests the Role does not allow")
}

// checkChildren checks that app's Deployment, Service and ConfigMap are
// what its spec asks for, and controlled by it.
func checkChildren(t *testing.T, r *run, app *v1alpha1.WebApp) {
	t.Helper()
	d, s, cm := r.deployment(app.Name), r.service(app.Name), r.configMap(app.Name+"-config")
	require.NotNil(t, d)
	require.NotNil(t, s)
	require.NotNil(t, cm)
	for _, obj := range []metav1.Object{d, s, cm} {
		assert.True(t, metav1.IsControlledBy(obj, app), "%s is controlled by the WebApp", obj.GetName())
		assert.Equal(t, app.Name, obj.GetLabels()[webapp.LabelInstance])
	}

	assert.Equal(t, app.Spec.Replicas, d.Spec.Replicas)
	assert.Equal(t, app.Name, d.Spec.Selector.MatchLabels[webapp.LabelInstance])
	assert.Equal(t, app.Name, d.Spec.Template.Labels[webapp.LabelInstance])
	assert.Equal(t, webapp.ConfigHash(app.Spec.Config), d.Spec.Template.Annotations[webapp.ConfigHashAnnotation])
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, app.Spec.Image, c.Image)
	require.Len(t, c.Ports, 1)
	assert.Equal(t, app.Spec.Port, c.Ports[0].ContainerPort)
	require.Len(t, c.EnvFrom, 1)
	assert.Equal(t, cm.Name, c.EnvFrom[0].ConfigMapRef.Name)

	assert.Equal(t, app.Name, s.Spec.Selector[webapp.LabelInstance])
	require.Len(t, s.Spec.Ports, 1)
	assert.Equal(t, app.Spec.Port, s.Spec.Ports[0].Port)
	assert.Equal(t, "http", s.Spec.Ports[0].TargetPort.StrVal)

	assert.Equal(t, app.Spec.Config, cm.Data)
}
