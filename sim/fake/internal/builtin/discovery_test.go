package builtin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// discoveryServer answers discovery from the builders, over HTTP, in the
// form the client asks for, and counts the aggregated answers.
type discoveryServer struct {
	extra      []Resource
	aggregated atomic.Int32
	legacy     atomic.Int32
}

func (s *discoveryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	aggregated := strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList")
	var body any
	contentType := "application/json"
	switch path := r.URL.Path; {
	case path == "/api" && aggregated:
		body, contentType = AggregatedAPI(), discovery.AcceptV2
	case path == "/apis" && aggregated:
		body, contentType = AggregatedAPIs(s.extra), discovery.AcceptV2
	case path == "/api":
		body = APIVersions()
	case path == "/apis":
		body = APIGroupList(s.extra)
	default:
		var gv schema.GroupVersion
		switch parts := strings.Split(strings.Trim(path, "/"), "/"); {
		case len(parts) == 2 && parts[0] == "api":
			gv.Version = parts[1]
		case len(parts) == 3 && parts[0] == "apis":
			gv.Group, gv.Version = parts[1], parts[2]
		default:
			http.NotFound(w, r)
			return
		}
		list, ok := APIResourceList(gv, s.extra)
		if !ok {
			http.NotFound(w, r)
			return
		}
		body = list
	}
	if contentType == discovery.AcceptV2 {
		s.aggregated.Add(1)
	} else {
		s.legacy.Add(1)
	}
	w.Header().Set("Content-Type", contentType)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// read serves extra and reads it back with client-go's discovery client,
// in the aggregated form or the legacy one.
func read(t *testing.T, extra []Resource, legacy bool) ([]*metav1.APIGroup, []*metav1.APIResourceList) {
	t.Helper()
	s := &discoveryServer{extra: extra}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	dc.UseLegacyDiscovery = legacy
	groups, lists, err := dc.ServerGroupsAndResources()
	require.NoError(t, err)
	if legacy {
		assert.Zero(t, s.aggregated.Load(), "aggregated answers to a legacy client")
	} else {
		assert.Equal(t, int32(2), s.aggregated.Load(), "aggregated answers, for /api and /apis")
		assert.Zero(t, s.legacy.Load(), "legacy answers to an aggregated client")
	}
	return groups, lists
}

// TestClientGoReadsTheTable serves the builders' documents and reads them
// with client-go, as TestTableMatchesAPIServer reads a real server's.
func TestClientGoReadsTheTable(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "aggregated", true: "legacy"}[legacy], func(t *testing.T) {
			groups, lists := read(t, nil, legacy)
			compareWithTable(t, groups, lists)
		})
	}
}

func TestAPIResourceList(t *testing.T) {
	l, ok := APIResourceList(schema.GroupVersion{Group: "apps", Version: "v1"}, nil)
	require.True(t, ok)
	assert.Equal(t, metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, l.TypeMeta)
	assert.Equal(t, "apps/v1", l.GroupVersion)
	assert.Equal(t, []string{
		"controllerrevisions",
		"daemonsets", "daemonsets/status",
		"deployments", "deployments/scale", "deployments/status",
		"replicasets", "replicasets/scale", "replicasets/status",
		"statefulsets", "statefulsets/scale", "statefulsets/status",
	}, resourceNames(l))
	assert.Equal(t, metav1.APIResource{
		Name: "deployments/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale",
		Verbs: metav1.Verbs{"get", "patch", "update"},
	}, l.APIResources[4])

	core, ok := APIResourceList(schema.GroupVersion{Version: "v1"}, nil)
	require.True(t, ok)
	assert.Equal(t, metav1.TypeMeta{Kind: "APIResourceList"}, core.TypeMeta, "/api/v1 has no apiVersion")

	for _, gv := range []schema.GroupVersion{
		{Group: "apps", Version: "v1beta1"},
		{Group: "apiextensions.k8s.io", Version: "v1"},
		{Version: "v2"},
	} {
		_, ok := APIResourceList(gv, nil)
		assert.False(t, ok, gv)
	}
}

func TestAPIGroupList(t *testing.T) {
	l := APIGroupList(nil)
	assert.Equal(t, metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, l.TypeMeta)
	require.NotEmpty(t, l.Groups)
	assert.Equal(t, "apps", l.Groups[0].Name, "the server lists apps first")
	for _, g := range l.Groups {
		assert.NotEmpty(t, g.Name, "the core group is /api's")
		assert.Equal(t, g.Versions[0], g.PreferredVersion, g.Name)
	}
	assert.Equal(t, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}, APIVersions())
}

func TestAggregatedAPI(t *testing.T) {
	l := AggregatedAPI()
	assert.Equal(t, metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}, l.TypeMeta)
	require.Len(t, l.Items, 1)
	assert.Equal(t, "", l.Items[0].Name)
	require.Len(t, l.Items[0].Versions, 1)
	assert.Equal(t, "v1", l.Items[0].Versions[0].Version)
	assert.Equal(t, apidiscoveryv2.DiscoveryFreshnessCurrent, l.Items[0].Versions[0].Freshness)
}

// widgets is a custom resource served in version v.
func widgets(group, v, resource string) Resource {
	return Resource{
		GVR:        schema.GroupVersionResource{Group: group, Version: v, Resource: resource},
		Kind:       "Widget",
		Singular:   "widget",
		Namespaced: true,
		Verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
		Subresources: []Subresource{
			{Name: "status", Kind: "Widget", Verbs: []string{"get", "patch", "update"}},
			{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: []string{"get", "patch", "update"}},
		},
	}
}

func TestExtra(t *testing.T) {
	extra := []Resource{
		widgets("example.com", "v1", "widgets"),
		widgets("example.com", "v1beta1", "widgets"),
		widgets("example.com", "v2", "widgets"),
		widgets("example.com", "v1", "gadgets"),
		widgets("a.example.org", "v1", "things"),
		widgets("apps", "v1", "widgets"), // a built-in group: left out
		widgets("apps", "v9", "widgets"), // a built-in group: left out
		widgets("", "v1", "widgets"),     // the core group: left out
	}
	given := make([]Resource, len(extra))
	for i, r := range extra {
		given[i] = r.clone()
	}

	groups := APIGroupList(extra).Groups
	builtinGroups := len(APIGroupList(nil).Groups)
	require.Len(t, groups, builtinGroups+2)
	assert.Equal(t, APIGroupList(nil).Groups, groups[:builtinGroups], "built-in groups first, unchanged")
	assert.Equal(t, "a.example.org", groups[builtinGroups].Name)
	example := groups[builtinGroups+1]
	assert.Equal(t, "example.com", example.Name)
	assert.Equal(t, []metav1.GroupVersionForDiscovery{
		{GroupVersion: "example.com/v2", Version: "v2"},
		{GroupVersion: "example.com/v1", Version: "v1"},
		{GroupVersion: "example.com/v1beta1", Version: "v1beta1"},
	}, example.Versions)
	assert.Equal(t, example.Versions[0], example.PreferredVersion)

	l, ok := APIResourceList(schema.GroupVersion{Group: "example.com", Version: "v1"}, extra)
	require.True(t, ok)
	assert.Equal(t, []string{"gadgets", "gadgets/status", "gadgets/scale", "widgets", "widgets/status", "widgets/scale"}, resourceNames(l))
	apps, _ := APIResourceList(schema.GroupVersion{Group: "apps", Version: "v1"}, nil)
	appsWithExtra, _ := APIResourceList(schema.GroupVersion{Group: "apps", Version: "v1"}, extra)
	assert.Equal(t, apps, appsWithExtra)
	_, ok = APIResourceList(schema.GroupVersion{Group: "apps", Version: "v9"}, extra)
	assert.False(t, ok)
	_, ok = APIResourceList(schema.GroupVersion{Group: "example.com", Version: "v3"}, extra)
	assert.False(t, ok)

	agg := AggregatedAPIs(extra).Items
	require.Len(t, agg, builtinGroups+2)
	assert.Equal(t, AggregatedAPIs(nil).Items, agg[:builtinGroups])
	assert.Equal(t, "example.com", agg[builtinGroups+1].Name)

	assert.Equal(t, given, extra, "extra is not changed")

	// Both forms read by client-go agree on the custom resources.
	aggGroups, aggLists := read(t, extra, false)
	legacyGroups, legacyLists := read(t, extra, true)
	assert.Equal(t, legacyGroups, aggGroups)
	require.Equal(t, len(legacyLists), len(aggLists))
	byGV := map[string]*metav1.APIResourceList{}
	for _, l := range legacyLists {
		byGV[l.GroupVersion] = l
	}
	for _, l := range aggLists {
		for i := range l.APIResources {
			if strings.Contains(l.APIResources[i].Name, "/") {
				l.APIResources[i].SingularName = "" // aggregated discovery gives a subresource its parent's
			}
		}
		assert.Equal(t, byGV[l.GroupVersion].APIResources, l.APIResources, l.GroupVersion)
	}
	assert.Contains(t, byGV, "example.com/v1beta1")
}

func resourceNames(l *metav1.APIResourceList) []string {
	var out []string
	for _, r := range l.APIResources {
		out = append(out, r.Name)
	}
	return out
}
