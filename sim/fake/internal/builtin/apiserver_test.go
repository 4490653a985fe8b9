package builtin

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

// TestTableMatchesAPIServer holds the table, and the documents built from
// it, to a real kube-apiserver of the table's version.
func TestTableMatchesAPIServer(t *testing.T) {
	cp := simtest.Require(t)

	for _, legacy := range []bool{false, true} {
		name := map[bool]string{false: "aggregated", true: "legacy"}[legacy]
		t.Run("discovery client, "+name, func(t *testing.T) {
			dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
			require.NoError(t, err)
			dc.UseLegacyDiscovery = legacy
			groups, lists, err := dc.ServerGroupsAndResources()
			require.NoError(t, err)
			compareWithTable(t, groups, lists)
		})
	}

	dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	require.NoError(t, err)
	get := func(t *testing.T, path, accept string, into any) {
		t.Helper()
		body, err := dc.RESTClient().Get().AbsPath(path).SetHeader("Accept", accept).Do(t.Context()).Raw()
		require.NoError(t, err, path)
		require.NoError(t, json.Unmarshal(body, into), path)
	}

	t.Run("legacy documents", func(t *testing.T) {
		var versions metav1.APIVersions
		get(t, "/api", discovery.AcceptV1, &versions)
		versions.ServerAddressByClientCIDRs = nil // see the package doc
		assert.Equal(t, APIVersions(), &versions, "/api")

		var groups metav1.APIGroupList
		get(t, "/apis", discovery.AcceptV1, &groups)
		groups.Groups = coveredGroups(groups.Groups)
		assert.Equal(t, APIGroupList(nil), &groups, "/apis")

		for _, gv := range tableGroupVersions() {
			path := "/apis/" + gv.String()
			if gv.Group == "" {
				path = "/api/" + gv.Version
			}
			var got metav1.APIResourceList
			get(t, path, discovery.AcceptV1, &got)
			got.APIResources = slices.DeleteFunc(got.APIResources, func(r metav1.APIResource) bool { return !inTable(gv, r.Name, kindOf(gv, r)) })
			for i := range got.APIResources {
				got.APIResources[i].StorageVersionHash = "" // see the package doc
			}
			want, ok := APIResourceList(gv, nil)
			require.True(t, ok, gv)
			assert.Equal(t, want, &got, path)
		}
	})

	t.Run("aggregated documents", func(t *testing.T) {
		var api apidiscoveryv2.APIGroupDiscoveryList
		get(t, "/api", discovery.AcceptV2, &api)
		assert.Equal(t, AggregatedAPI(), &api, "/api")

		var apis apidiscoveryv2.APIGroupDiscoveryList
		get(t, "/apis", discovery.AcceptV2, &apis)
		apis.Items = coveredDiscovery(apis.Items)
		assert.Equal(t, AggregatedAPIs(nil), &apis, "/apis")
	})
}

// coveredGroups is groups without the versions the table does not cover.
func coveredGroups(groups []metav1.APIGroup) []metav1.APIGroup {
	var out []metav1.APIGroup
	for _, g := range groups {
		var versions []metav1.GroupVersionForDiscovery
		for _, v := range g.Versions {
			if covered(schema.GroupVersion{Group: g.Name, Version: v.Version}) {
				versions = append(versions, v)
			}
		}
		if len(versions) > 0 {
			g.Versions = versions
			out = append(out, g)
		}
	}
	return out
}

// coveredDiscovery is groups without what the table does not cover.
func coveredDiscovery(groups []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	out := []apidiscoveryv2.APIGroupDiscovery{}
	for _, g := range groups {
		var versions []apidiscoveryv2.APIVersionDiscovery
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			if !covered(gv) {
				continue
			}
			var resources []apidiscoveryv2.APIResourceDiscovery
			for _, r := range v.Resources {
				if r.ResponseKind == nil || !inTable(gv, r.Resource, schema.GroupVersionKind(*r.ResponseKind)) {
					continue
				}
				var subresources []apidiscoveryv2.APISubresourceDiscovery
				for _, s := range r.Subresources {
					if s.ResponseKind != nil && inTable(gv, r.Resource+"/"+s.Subresource, schema.GroupVersionKind(*s.ResponseKind)) {
						subresources = append(subresources, s)
					}
				}
				r.Subresources = subresources
				resources = append(resources, r)
			}
			v.Resources = resources
			versions = append(versions, v)
		}
		if len(versions) > 0 {
			g.Versions = versions
			out = append(out, g)
		}
	}
	return out
}
