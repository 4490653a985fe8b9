package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestReadCRDs(t *testing.T) {
	crds, err := sim.ReadCRDs("testdata/crds")
	require.NoError(t, err)
	require.Len(t, crds, 1, "the ConfigMap beside it is skipped")
	assert.Equal(t, "gadgets.installed.converge.test", crds[0].Name)

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.b.c\n"
	for _, tc := range []struct {
		name, content, want string
	}{
		{"bad.yaml", "---\n" + crd + "---\nkind: [\n", "bad.yaml, document 2"},
		{"unknown.yaml", crd + "spec:\n  grup: b.c\n", `unknown field "grup"`},
		{"old.yaml", strings.Replace(crd, "v1\n", "v1beta1\n", 1), `apiVersion "apiextensions.k8s.io/v1beta1": only apiextensions.k8s.io/v1 is served`},
		{"twice.yaml", crd + "---\n" + crd, "a.b.c is defined twice"},
		{"huge.yaml", crd + "# " + strings.Repeat("x", sim.MaxCRDFileSize), "larger than"},
	} {
		_, err := sim.ReadCRDs(write(tc.name, tc.content))
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err = sim.ReadCRDs(filepath.Join(dir, "missing.yaml"))
	assert.ErrorContains(t, err, "missing.yaml")
}

// TestBackendsInstallCRDs: every backend installs the CRDs it is given at
// Start, established and served by the time Start returns.
func TestBackendsInstallCRDs(t *testing.T) {
	paths := []string{"testdata/crds"}
	gadgets := schema.GroupVersionResource{Group: "installed.converge.test", Version: "v1", Resource: "gadgets"}
	check := func(t *testing.T, b sim.Backend) {
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Stop()) }()
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "installed.converge.test/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": "g"}, "spec": map[string]any{},
		}}
		got, err := dynamic.NewForConfigOrDie(env.RESTConfig).Resource(gadgets).Namespace(env.Namespace).Create(context.Background(), g, metav1.CreateOptions{})
		require.NoError(t, err, "served as soon as Start returns")
		size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
		assert.Equal(t, int64(3), size, "defaulted by its schema")

		// The request is defaulted before it is compared: a defaulted
		// field removed is no change of the spec, and its generation
		// stays; a field changed moves it on.
		client := dynamic.NewForConfigOrDie(env.RESTConfig).Resource(gadgets).Namespace(env.Namespace)
		unstructured.RemoveNestedField(got.Object, "spec", "size")
		got, err = client.Update(context.Background(), got, metav1.UpdateOptions{})
		require.NoError(t, err)
		size, _, _ = unstructured.NestedInt64(got.Object, "spec", "size")
		assert.Equal(t, int64(3), size, "defaulted again")
		assert.Equal(t, int64(1), got.GetGeneration(), "removing a defaulted field changes no spec")
		require.NoError(t, unstructured.SetNestedField(got.Object, int64(4), "spec", "size"))
		got, err = client.Update(context.Background(), got, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Equal(t, int64(2), got.GetGeneration())
	}
	t.Run("fake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{CRDPaths: paths})
			require.NoError(t, err)
			check(t, b)
		})
	})
	t.Run("envtest", func(t *testing.T) {
		cp := simtest.Require(t)
		b, err := envtest.NewBackendWith(cp, envtest.BackendConfig{Prefix: "crds-", CRDPaths: paths})
		require.NoError(t, err)
		check(t, b)
	})
	t.Run("cluster", func(t *testing.T) {
		b, err := cluster.New(cluster.Config{Kubeconfig: envtestKubeconfig(t, "converge-crds"), NamespacePrefix: "crds-", CRDPaths: paths})
		require.NoError(t, err)
		check(t, b)
	})
	_, err := fake.New(fake.Config{CRDPaths: []string{"testdata/missing"}})
	assert.ErrorContains(t, err, "testdata/missing", "a bad path fails at New, before any run")
}
