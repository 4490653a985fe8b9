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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
