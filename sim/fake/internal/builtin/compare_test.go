package builtin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// omitted lists what a real server serves, in a group-version the table
// covers, that the table leaves out on purpose, keyed as "<group-version>
// <resource>[/<subresource>]", with why. Nothing is left out today.
var omitted = map[string]string{}

// clientGoScheme is client-go's scheme as client-go builds it: scheme.Scheme
// itself may hold more, as other packages of a binary add to it (envtest
// adds apiextensions.k8s.io).
var clientGoScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// covered reports whether the table covers gv: client-go's scheme knows its
// kinds.
func covered(gv schema.GroupVersion) bool { return clientGoScheme.IsVersionRegistered(gv) }

// inTable reports whether a server's resource (or "<resource>/<subresource>")
// of gv, serving kind, should be in the table: client-go's scheme
// registers the kind (a group-version client-go has may lack a kind the
// server added since) and omitted does not name it. An empty group and
// version in kind mean gv's.
func inTable(gv schema.GroupVersion, name string, kind schema.GroupVersionKind) bool {
	if kind.Group == "" && kind.Version == "" {
		kind = gv.WithKind(kind.Kind)
	}
	_, skip := omitted[gv.String()+" "+name]
	return covered(gv) && clientGoScheme.Recognizes(kind) && !skip
}

// kindOf is the kind an APIResource of gv serves.
func kindOf(gv schema.GroupVersion, r metav1.APIResource) schema.GroupVersionKind {
	if r.Group != "" || r.Version != "" {
		return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	}
	return gv.WithKind(r.Kind)
}

// compareWithTable holds what a discovery client read (ServerGroupsAndResources)
// to the table: the same covered group-versions in the same order, the same
// preferred versions, and resource by resource the same fields, with nothing
// missing on either side but what omitted names.
func compareWithTable(t *testing.T, groups []*metav1.APIGroup, lists []*metav1.APIResourceList) {
	t.Helper()
	var servedGVs []schema.GroupVersion
	preferred := map[string]string{}
	for _, g := range groups {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			if !covered(gv) {
				t.Logf("not compared: %s, whose kinds client-go's scheme does not register", gv)
				continue
			}
			servedGVs = append(servedGVs, gv)
			preferred[g.Name] = g.PreferredVersion.Version
		}
	}
	assert.Equal(t, tableGroupVersions(), servedGVs, "group-versions, in order")
	assert.Equal(t, preferred, PreferredVersions(), "preferred versions")

	served := map[string]metav1.APIResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if !assert.NoError(t, err) {
			continue
		}
		for _, r := range l.APIResources {
			if inTable(gv, r.Name, kindOf(gv, r)) {
				served[gv.String()+" "+r.Name] = r
			}
		}
	}
	for key := range omitted {
		assert.NotContains(t, served, key, "omitted, but not served any more: drop it from omitted")
	}

	for _, r := range table {
		gv := r.GVR.GroupVersion().String()
		want := metav1.APIResource{
			Name:         r.GVR.Resource,
			SingularName: r.Singular,
			Namespaced:   r.Namespaced,
			Kind:         r.Kind,
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
		}
		assertServed(t, served, gv, want)
		for _, s := range r.Subresources {
			assertServed(t, served, gv, metav1.APIResource{
				Name:       r.GVR.Resource + "/" + s.Name,
				Namespaced: r.Namespaced,
				Group:      s.Group,
				Version:    s.Version,
				Kind:       s.Kind,
				Verbs:      s.Verbs,
			})
		}
	}
	for key := range served {
		t.Errorf("the server serves %s, the table lacks it (add it, or to omitted with why)", key)
	}
}

// assertServed checks that served holds want, and takes it out of served.
func assertServed(t *testing.T, served map[string]metav1.APIResource, gv string, want metav1.APIResource) {
	t.Helper()
	key := gv + " " + want.Name
	got, ok := served[key]
	if !assert.True(t, ok, "the table has %s, the server does not serve it", key) {
		return
	}
	delete(served, key)
	got.StorageVersionHash = "" // not in the table: see the package doc
	if want.SingularName == "" {
		got.SingularName = "" // aggregated discovery gives a subresource its parent's
	}
	assert.Equal(t, want, got, key)
}

func tableGroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, r := range table {
		if gv := r.GVR.GroupVersion(); len(out) == 0 || out[len(out)-1] != gv {
			out = append(out, gv)
		}
	}
	return out
}
