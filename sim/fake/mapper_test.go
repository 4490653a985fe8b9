package fake_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
)

// The in-process mapper answers as client-go's discovery-backed mapper
// does for every resource the API serves, a CRD's included, and sees a
// CRD established after it was first asked only once reset, as that one
// does.
func TestTheInProcessMapperAnswersAsDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		require.NotNil(t, env.RESTMapper)
		dc, err := discovery.NewDiscoveryClientForConfig(env.RESTConfig)
		require.NoError(t, err)
		viaDiscovery := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		thing := schema.GroupKind{Group: "example.com", Kind: "Thing"}
		_, err = env.RESTMapper.RESTMapping(thing)
		assert.True(t, meta.IsNoMatchError(err), "no CRD yet: %v", err)

		createThings(t, env)
		_, err = env.RESTMapper.RESTMapping(thing)
		assert.True(t, meta.IsNoMatchError(err), "read before the CRD, not reset since: %v", err)
		env.RESTMapper.Reset()

		_, lists, err := dc.ServerGroupsAndResources()
		require.NoError(t, err)
		kinds := 0
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			require.NoError(t, err)
			for _, r := range list.APIResources {
				if strings.Contains(r.Name, "/") {
					continue // a subresource: neither maps it
				}
				kinds++
				gvk, gvr := gv.WithKind(r.Kind), gv.WithResource(r.Name)
				for _, v := range [][]string{{gv.Version}, nil} {
					want, werr := viaDiscovery.RESTMappings(gvk.GroupKind(), v...)
					got, gerr := env.RESTMapper.RESTMappings(gvk.GroupKind(), v...)
					assert.Equal(t, werr, gerr, "%s %v", gvk, v)
					assert.Equal(t, want, got, "%s %v", gvk, v)
				}
				for _, q := range []schema.GroupVersionResource{gvr, {Resource: r.Name}, {Resource: r.SingularName}, {Group: gv.Group, Resource: r.Name}} {
					if q.Resource == "" {
						continue
					}
					want, werr := viaDiscovery.KindsFor(q)
					got, gerr := env.RESTMapper.KindsFor(q)
					assert.Equal(t, werr, gerr, "%s", q)
					assert.Equal(t, want, got, "%s", q)
					wantR, werr := viaDiscovery.ResourcesFor(q)
					gotR, gerr := env.RESTMapper.ResourcesFor(q)
					assert.Equal(t, werr, gerr, "%s", q)
					assert.Equal(t, wantR, gotR, "%s", q)
				}
				for _, s := range append([]string{r.Name}, r.ShortNames...) {
					want, werr := viaDiscovery.ResourceSingularizer(s)
					got, gerr := env.RESTMapper.ResourceSingularizer(s)
					assert.Equal(t, werr, gerr, "%s", s)
					assert.Equal(t, want, got, "%s", s)
				}
			}
		}
		assert.Greater(t, kinds, 40, "every built-in and the CRD's")
		m, err := env.RESTMapper.RESTMapping(thing)
		require.NoError(t, err)
		assert.Equal(t, "v1", m.Resource.Version, "the preferred version: the highest in Kubernetes' order")
		assert.Equal(t, meta.RESTScopeNameRoot, m.Scope.Name())
	})
}

// createThings creates the CRD of the cluster-scoped example.com Thing,
// served in v1beta1 and v1.
func createThings(t *testing.T, env *sim.Env) {
	t.Helper()
	preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": preserve, "status": preserve}}}}
	}
	_, err := apiextensions.NewForConfigOrDie(env.RESTConfig).ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList", ShortNames: []string{"th"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1beta1", false), version("v1", true)},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Servers that serve the same resources share a mapper; one does not map
// what only another serves, whichever asked first.
func TestServersShareOnlyTheMappersOfWhatTheyServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, with := start(t)
		_, without := start(t)
		createThings(t, with)
		with.RESTMapper.Reset()
		thing := schema.GroupKind{Group: "example.com", Kind: "Thing"}
		_, err := with.RESTMapper.RESTMapping(thing)
		require.NoError(t, err)
		_, err = without.RESTMapper.RESTMapping(thing)
		assert.True(t, meta.IsNoMatchError(err), "a server without the CRD: %v", err)

		_, again := start(t)
		createThings(t, again)
		again.RESTMapper.Reset()
		m, err := again.RESTMapper.RESTMapping(thing)
		require.NoError(t, err)
		assert.Equal(t, "v1", m.Resource.Version)
	})
}
