package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestReadRBAC(t *testing.T) {
	objs, err := sim.ReadRBAC("testdata/rbac")
	require.NoError(t, err)
	assert.Len(t, objs, 2, "the Role and its binding; the ConfigMap is skipped")

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\nrulez: []\n"), 0o600))
	_, err = sim.ReadRBAC(bad)
	assert.ErrorContains(t, err, `bad.yaml, document 1`)
	_, err = (sim.Identity{ServiceAccount: "Not Valid"}).Validate()
	assert.ErrorContains(t, err, "service account")
}

// TestControllerIdentity: on every backend, the controller acts as the
// identity it declares, with exactly the RBAC it declares.
func TestControllerIdentity(t *testing.T) {
	id := sim.Identity{ServiceAccount: "limited", RBACPaths: []string{"testdata/rbac"}}
	check := func(t *testing.T, b sim.Backend) {
		ctx := context.Background()
		env, err := b.Start(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Stop()) }()
		c, err := kubernetes.NewForConfig(env.ControllerConfig)
		require.NoError(t, err)
		_, err = c.CoreV1().ConfigMaps(env.Namespace).List(ctx, metav1.ListOptions{})
		assert.NoError(t, err, "reading ConfigMaps is granted")
		_, err = c.CoreV1().ConfigMaps(env.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "writing is not: %v", err)
		_, err = c.CoreV1().Secrets(env.Namespace).List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "nor are Secrets: %v", err)
		assert.Contains(t, err.Error(), "system:serviceaccount:"+env.Namespace+":limited")
	}
	t.Run("fake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{Controller: id})
			require.NoError(t, err)
			check(t, b)
		})
	})
	t.Run("envtest", func(t *testing.T) {
		cp := simtest.Require(t)
		b, err := envtest.NewBackendWith(cp, envtest.BackendConfig{Prefix: "identity-", Controller: id})
		require.NoError(t, err)
		check(t, b)
	})
	t.Run("cluster", func(t *testing.T) {
		b, err := cluster.New(cluster.Config{Kubeconfig: envtestKubeconfig(t, "converge-identity"), NamespacePrefix: "identity-", Controller: id})
		require.NoError(t, err)
		check(t, b)
	})
}

// kubebuilderRBAC is config/rbac as `kubebuilder init` and `create api`
// scaffold it: built by kustomize, in namespace "system".
const kubebuilderRBAC = "testdata/kubebuilder/config/rbac"

func TestReadRBACOfAKubebuilderProject(t *testing.T) {
	objs, err := sim.ReadRBAC(kubebuilderRBAC)
	require.NoError(t, err)
	require.Len(t, objs, 11, "every object its kustomization lists")
	sa, ok := objs[0].(*corev1.ServiceAccount)
	require.True(t, ok, "the kustomization's order: %T first", objs[0])
	assert.Equal(t, "system", sa.Namespace)

	_, err = (sim.Identity{ServiceAccount: "controller-manager", RBACPaths: []string{kubebuilderRBAC}}).Validate()
	require.NoError(t, err)
	_, err = (sim.Identity{ServiceAccount: "manager", RBACPaths: []string{kubebuilderRBAC}}).Validate()
	assert.ErrorContains(t, err, `service account "manager" is bound by none of the RBAC's bindings, which bind controller-manager`)
	// config/default prefixes every name, the ServiceAccount's too.
	_, err = (sim.Identity{ServiceAccount: "controller-manager", RBACPaths: []string{"testdata/kubebuilder/config/default"}}).Validate()
	assert.ErrorContains(t, err, "which bind demo-controller-manager")
}

func TestPlace(t *testing.T) {
	objs, err := sim.ReadRBAC(kubebuilderRBAC)
	require.NoError(t, err)
	placed := sim.Place(objs, "run-1")
	names := map[string]string{}
	for _, obj := range placed {
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			names["ServiceAccount "+o.Name] = o.Namespace
		case *rbacv1.Role:
			names["Role "+o.Name] = o.Namespace
		case *rbacv1.RoleBinding:
			names["RoleBinding "+o.Name] = o.Namespace + " -> " + o.RoleRef.Name + " for " + o.Subjects[0].Namespace + "/" + o.Subjects[0].Name
		case *rbacv1.ClusterRole:
			names["ClusterRole "+o.Name] = ""
		case *rbacv1.ClusterRoleBinding:
			names["ClusterRoleBinding "+o.Name] = o.RoleRef.Name + " for " + o.Subjects[0].Namespace + "/" + o.Subjects[0].Name
		}
	}
	assert.Equal(t, "run-1", names["ServiceAccount controller-manager"])
	assert.Equal(t, "run-1", names["Role leader-election-role"])
	assert.Equal(t, "run-1 -> leader-election-role for run-1/controller-manager", names["RoleBinding leader-election-rolebinding"])
	assert.Contains(t, names, "ClusterRole manager-role.run-1")
	assert.Equal(t, "manager-role.run-1 for run-1/controller-manager", names["ClusterRoleBinding manager-rolebinding.run-1"])
	assert.Equal(t, "system", objs[0].(*corev1.ServiceAccount).Namespace, "the objects read are left as they are")

	// A subject in a namespace the RBAC does not deploy to stays there, as
	// does a reference to a ClusterRole it does not define.
	other := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "x", Namespace: "kube-system"}},
	}
	b := sim.Place([]runtime.Object{other}, "run-1")[0].(*rbacv1.ClusterRoleBinding)
	assert.Equal(t, "view", b.RoleRef.Name)
	assert.Equal(t, "kube-system", b.Subjects[0].Namespace)

	assert.Equal(t, "namespace system, named by the RBAC, is each run's own namespace; its 8 ClusterRoles and ClusterRoleBindings are each run's own, named <name>.<run namespace>", sim.Placed(objs))
}

// TestKubebuilderRBACSideBySide: a kubebuilder project's RBAC, as
// scaffolded, gives its controller what it grants in each of two runs side
// by side, on each backend, and nothing else.
func TestKubebuilderRBACSideBySide(t *testing.T) {
	crds, err := sim.ReadCRDs("testdata/kubebuilder/config/crd")
	require.NoError(t, err)
	require.Len(t, crds, 1)
	widgets := schema.GroupVersionResource{Group: "apps.example.com", Version: "v1alpha1", Resource: "widgets"}
	id := sim.Identity{ServiceAccount: "controller-manager", RBACPaths: []string{kubebuilderRBAC}}
	check := func(t *testing.T, backends ...sim.Backend) {
		ctx := context.Background()
		var envs []*sim.Env
		for _, b := range backends {
			env, err := b.Start(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, b.Stop()) }()
			require.NoError(t, sim.InstallCRDs(ctx, env.RESTConfig, 0, crds...))
			envs = append(envs, env)
		}
		for _, env := range envs {
			dc, err := dynamic.NewForConfig(env.ControllerConfig)
			require.NoError(t, err)
			_, err = dc.Resource(widgets).Namespace(env.Namespace).List(ctx, metav1.ListOptions{})
			assert.NoError(t, err, "the ClusterRole grants widgets, in %s", env.Namespace)
			c, err := kubernetes.NewForConfig(env.ControllerConfig)
			require.NoError(t, err)
			_, err = c.CoordinationV1().Leases(env.Namespace).List(ctx, metav1.ListOptions{})
			assert.NoError(t, err, "the leader election Role grants Leases, in %s", env.Namespace)
			_, err = c.CoreV1().Secrets(env.Namespace).List(ctx, metav1.ListOptions{})
			assert.True(t, apierrors.IsForbidden(err), "nothing grants Secrets: %v", err)
		}
	}
	t.Run("fake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{Controller: id})
			require.NoError(t, err)
			check(t, b)
		})
	})
	t.Run("envtest", func(t *testing.T) {
		cp := simtest.Require(t)
		var backends []sim.Backend
		for range 2 {
			b, err := envtest.NewBackendWith(cp, envtest.BackendConfig{Prefix: "kubebuilder-", Controller: id})
			require.NoError(t, err)
			backends = append(backends, b)
		}
		check(t, backends...)
	})
}
