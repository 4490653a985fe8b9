package builtin

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name       string
		gvr        schema.GroupVersionResource
		found      bool
		kind       string
		namespaced bool
	}{
		{"core", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true, "Pod", true},
		{"cluster-scoped", schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, true, "Node", false},
		{"group", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true, "Deployment", true},
		{"not preferred version", schema.GroupVersionResource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"}, true, "HorizontalPodAutoscaler", true},
		{"version off by default", schema.GroupVersionResource{Group: "apps", Version: "v1beta1", Resource: "deployments"}, false, "", false},
		{"subresource", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments/scale"}, false, "", false},
		{"group not in client-go's scheme", schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, false, "", false},
		{"unknown", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := Lookup(tt.gvr)
			require.Equal(t, tt.found, ok)
			if !ok {
				return
			}
			assert.Equal(t, tt.gvr, r.GVR)
			assert.Equal(t, tt.kind, r.Kind)
			assert.Equal(t, tt.namespaced, r.Namespaced)
		})
	}
}

func TestLookupSubresources(t *testing.T) {
	r, ok := Lookup(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})
	require.True(t, ok)
	assert.Equal(t, []Subresource{
		{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: []string{"get", "patch", "update"}},
		{Name: "status", Kind: "Deployment", Verbs: []string{"get", "patch", "update"}},
	}, r.Subresources)
	assert.Equal(t, []string{"deploy"}, r.ShortNames)
	assert.Equal(t, []string{"all"}, r.Categories)
	assert.Equal(t, "deployment", r.Singular)
}

func TestByKind(t *testing.T) {
	tests := []struct {
		name  string
		gvk   schema.GroupVersionKind
		found bool
		gvr   schema.GroupVersionResource
	}{
		{"core", schema.GroupVersionKind{Version: "v1", Kind: "Event"}, true, schema.GroupVersionResource{Version: "v1", Resource: "events"}},
		{"same kind, other group", schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, true, schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}},
		{"preferred version", schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}, true, schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}},
		{"other version", schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler"}, true, schema.GroupVersionResource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"}},
		{"irregular plural", schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}, true, schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}},
		{"subresource kind", schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, false, schema.GroupVersionResource{}},
		{"wrong group", schema.GroupVersionKind{Version: "v1", Kind: "Deployment"}, false, schema.GroupVersionResource{}},
		{"version off by default", schema.GroupVersionKind{Group: "apps", Version: "v1beta2", Kind: "Deployment"}, false, schema.GroupVersionResource{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := ByKind(tt.gvk)
			require.Equal(t, tt.found, ok)
			if ok {
				assert.Equal(t, tt.gvr, r.GVR)
				assert.Equal(t, tt.gvk.Kind, r.Kind)
			}
		})
	}
}

func TestPreferredVersions(t *testing.T) {
	p := PreferredVersions()
	assert.Equal(t, "v1", p[""])
	assert.Equal(t, "v1", p["apps"])
	assert.Equal(t, "v2", p["autoscaling"])
	groups := map[string]bool{}
	for _, r := range All() {
		groups[r.GVR.Group] = true
		assert.Contains(t, p, r.GVR.Group)
	}
	assert.Len(t, p, len(groups))
}

// TestTableIsConsistent checks what the server comparison takes for
// granted: one entry per GVR and per kind, kinds client-go can decode, and
// each group-version (and each group) in one run, as discovery groups them.
func TestTableIsConsistent(t *testing.T) {
	gvrs := map[schema.GroupVersionResource]bool{}
	gvks := map[schema.GroupVersionKind]bool{}
	for _, r := range All() {
		gv := r.GVR.GroupVersion()
		assert.False(t, gvrs[r.GVR], "%v twice", r.GVR)
		gvrs[r.GVR] = true
		gvk := gv.WithKind(r.Kind)
		assert.False(t, gvks[gvk], "%v twice", gvk)
		gvks[gvk] = true

		assert.True(t, covered(gv), "%v: not in client-go's scheme", gv)
		assert.True(t, clientGoScheme.Recognizes(gvk), "%v: not in client-go's scheme", gvk)
		assert.NotEmpty(t, r.Singular, r.GVR)
		assert.NotEmpty(t, r.Verbs, r.GVR)
		assert.True(t, slices.IsSorted(r.Verbs), "%v: verbs not sorted", r.GVR)
		for _, s := range r.Subresources {
			sgv := schema.GroupVersion{Group: s.Group, Version: s.Version}
			if sgv.Empty() {
				sgv = gv
			}
			assert.True(t, clientGoScheme.Recognizes(sgv.WithKind(s.Kind)), "%v/%s: %v not in client-go's scheme", r.GVR, s.Name, sgv.WithKind(s.Kind))
			assert.NotEmpty(t, s.Verbs, "%v/%s", r.GVR, s.Name)
			assert.True(t, slices.IsSorted(s.Verbs), "%v/%s: verbs not sorted", r.GVR, s.Name)
		}
	}

	gvs := tableGroupVersions()
	seenGV := map[schema.GroupVersion]bool{}
	seenGroup := map[string]bool{}
	for i, gv := range gvs {
		assert.False(t, seenGV[gv], "%v in two runs", gv)
		seenGV[gv] = true
		if i == 0 || gvs[i-1].Group != gv.Group {
			assert.False(t, seenGroup[gv.Group], "group %q in two runs", gv.Group)
			seenGroup[gv.Group] = true
		}
	}
	assert.Equal(t, schema.GroupVersion{Version: "v1"}, gvs[0], "the core group comes first")
}

// TestCallersCannotChangeTheTable changes everything the package hands out.
func TestCallersCannotChangeTheTable(t *testing.T) {
	before := All()
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

	all := All()
	for i := range all {
		all[i].Verbs[0] = "changed"
		all[i].Kind = "Changed"
		if len(all[i].Subresources) > 0 {
			all[i].Subresources[0].Verbs[0] = "changed"
		}
	}
	r, _ := Lookup(deployments)
	r.ShortNames[0] = "changed"
	r.Subresources[0].Verbs[0] = "changed"
	r, _ = ByKind(deployments.GroupVersion().WithKind("Deployment"))
	r.Categories[0] = "changed"
	l, _ := APIResourceList(deployments.GroupVersion(), nil)
	l.APIResources[0].Verbs[0] = "changed"
	a := AggregatedAPIs(nil)
	a.Items[0].Versions[0].Resources[0].Verbs[0] = "changed"
	a.Items[0].Versions[0].Resources[0].Subresources = nil
	PreferredVersions()["apps"] = "v0"

	assert.Equal(t, before, All())
	assert.Equal(t, "v1", PreferredVersions()["apps"])
}

// TestDecodableLeavesOutWhatClientGoLacks builds the table against a
// client-go that knows Deployments but not Scale: every other resource
// goes, and deployments keep status but lose scale.
func TestDecodableLeavesOutWhatClientGoLacks(t *testing.T) {
	s := runtime.NewScheme()
	s.AddKnownTypes(appsv1.SchemeGroupVersion, &appsv1.Deployment{})
	got := decodable(served, s)
	require.Len(t, got, 1)
	assert.Equal(t, "deployments", got[0].GVR.Resource)
	var subs []string
	for _, sub := range got[0].Subresources {
		subs = append(subs, sub.Name)
	}
	assert.Equal(t, []string{"status"}, subs)

	full, ok := func() (Resource, bool) {
		for _, r := range served {
			if r.GVR == got[0].GVR {
				return r, true
			}
		}
		return Resource{}, false
	}()
	require.True(t, ok)
	assert.Len(t, full.Subresources, 2, "served itself is not changed")
}

// TestTableLeavesOut says which of the server's resources the client-go
// this is built with cannot decode: none with the newest client-go
// converge supports, the kinds v1.37 added since with an older one (six
// with v0.35).
func TestTableLeavesOut(t *testing.T) {
	var out []string
	for _, r := range served {
		if _, ok := Lookup(r.GVR); !ok {
			out = append(out, r.GVR.GroupVersion().WithKind(r.Kind).String())
		}
	}
	t.Logf("left out, as client-go does not register their kinds: %v", out)
	if clientGoScheme.Recognizes(schema.GroupVersionKind{Group: "storagemigration.k8s.io", Version: "v1", Kind: "StorageVersionMigration"}) {
		assert.Empty(t, out)
	} else {
		assert.NotEmpty(t, out)
		assert.NotContains(t, out, "apps/v1, Kind=Deployment")
	}
}
