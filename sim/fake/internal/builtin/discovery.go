package builtin

import (
	"maps"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/restmapper"
)

// APIVersions is the document of /api: the core group's only version.
func APIVersions() *metav1.APIVersions {
	return &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
	}
}

// APIGroupList is the document of /apis: every group but the core one,
// each with its versions, preferred first. See the package doc for extra.
func APIGroupList(extra []Resource) *metav1.APIGroupList {
	out := &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{},
	}
	for _, g := range servedGroups(extra) {
		if g.name == "" {
			continue
		}
		group := metav1.APIGroup{Name: g.name}
		for _, v := range g.versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{
				GroupVersion: schema.GroupVersion{Group: g.name, Version: v.name}.String(),
				Version:      v.name,
			})
		}
		group.PreferredVersion = group.Versions[0]
		out.Groups = append(out.Groups, group)
	}
	return out
}

// APIResourceList is the document of /api/v1 or /apis/<group>/<version>:
// each resource followed by its subresources. It reports false for a
// group-version nothing serves, which the server answers with 404. See the
// package doc for extra.
func APIResourceList(gv schema.GroupVersion, extra []Resource) (*metav1.APIResourceList, bool) {
	for _, g := range servedGroups(extra) {
		if g.name != gv.Group {
			continue
		}
		for _, v := range g.versions {
			if v.name != gv.Version {
				continue
			}
			out := &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: gv.String(),
				APIResources: apiResources(v.resources),
			}
			if gv.Group == "" {
				out.APIVersion = "" // as /api/v1 has it
			}
			return out, true
		}
	}
	return nil, false
}

// AggregatedAPI is /api in the aggregated form, the core group alone.
// client-go asks for the aggregated form first (Accept discovery.AcceptV2)
// and takes it only when the response's Content-Type is that media type;
// otherwise it falls back to the legacy documents.
func AggregatedAPI() *apidiscoveryv2.APIGroupDiscoveryList {
	return aggregated(servedGroups(nil)[:1])
}

// AggregatedAPIs is /apis in the aggregated form: every group but the core
// one, each version with its resources. See the package doc for extra.
func AggregatedAPIs(extra []Resource) *apidiscoveryv2.APIGroupDiscoveryList {
	return aggregated(servedGroups(extra)[1:])
}

// servedGroup is one group as discovery lists it.
type servedGroup struct {
	name     string
	versions []servedVersion // preferred first
}

type servedVersion struct {
	name      string
	resources []Resource
}

// servedGroups lays out the built-ins and extra as the server lists them:
// the core group first, then /apis's groups, the built-in ones before those
// of extra.
func servedGroups(extra []Resource) []servedGroup {
	var out []servedGroup
	builtin := map[string]bool{}
	for _, r := range table {
		gv := r.GVR.GroupVersion()
		builtin[gv.Group] = true
		if len(out) == 0 || out[len(out)-1].name != gv.Group {
			out = append(out, servedGroup{name: gv.Group})
		}
		g := &out[len(out)-1]
		if len(g.versions) == 0 || g.versions[len(g.versions)-1].name != gv.Version {
			g.versions = append(g.versions, servedVersion{name: gv.Version})
		}
		v := &g.versions[len(g.versions)-1]
		v.resources = append(v.resources, r)
	}

	custom := map[string]map[string][]Resource{} // group -> version -> resources
	for _, r := range extra {
		if builtin[r.GVR.Group] {
			continue
		}
		if custom[r.GVR.Group] == nil {
			custom[r.GVR.Group] = map[string][]Resource{}
		}
		custom[r.GVR.Group][r.GVR.Version] = append(custom[r.GVR.Group][r.GVR.Version], r)
	}
	for _, name := range slices.Sorted(maps.Keys(custom)) {
		g := servedGroup{name: name}
		byPriority := func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) }
		for _, v := range slices.SortedFunc(maps.Keys(custom[name]), byPriority) {
			rs := custom[name][v]
			slices.SortStableFunc(rs, func(a, b Resource) int { return strings.Compare(a.GVR.Resource, b.GVR.Resource) })
			g.versions = append(g.versions, servedVersion{name: v, resources: rs})
		}
		out = append(out, g)
	}
	return out
}

// apiResources lists rs the legacy way: a subresource is an APIResource
// named <resource>/<subresource>, with no singular name.
func apiResources(rs []Resource) []metav1.APIResource {
	out := []metav1.APIResource{}
	for _, r := range rs {
		out = append(out, metav1.APIResource{
			Name:         r.GVR.Resource,
			SingularName: r.Singular,
			Namespaced:   r.Namespaced,
			Kind:         r.Kind,
			Verbs:        slices.Clone(r.Verbs),
			ShortNames:   slices.Clone(r.ShortNames),
			Categories:   slices.Clone(r.Categories),
		})
		for _, s := range r.Subresources {
			out = append(out, metav1.APIResource{
				Name:       r.GVR.Resource + "/" + s.Name,
				Namespaced: r.Namespaced,
				Group:      s.Group,
				Version:    s.Version,
				Kind:       s.Kind,
				Verbs:      slices.Clone(s.Verbs),
			})
		}
	}
	return out
}

func aggregated(groups []servedGroup) *apidiscoveryv2.APIGroupDiscoveryList {
	out := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apidiscoveryv2.SchemeGroupVersion.String()},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range groups {
		group := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			dv := apidiscoveryv2.APIVersionDiscovery{Version: v.name, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, r := range v.resources {
				dv.Resources = append(dv.Resources, discoveryResource(r))
			}
			group.Versions = append(group.Versions, dv)
		}
		out.Items = append(out.Items, group)
	}
	return out
}

// discoveryResource is r the aggregated way, its subresources nested.
func discoveryResource(r Resource) apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeCluster
	if r.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	out := apidiscoveryv2.APIResourceDiscovery{
		Resource:         r.GVR.Resource,
		ResponseKind:     &metav1.GroupVersionKind{Kind: r.Kind},
		Scope:            scope,
		SingularResource: r.Singular,
		Verbs:            slices.Clone(r.Verbs),
		ShortNames:       slices.Clone(r.ShortNames),
		Categories:       slices.Clone(r.Categories),
	}
	for _, s := range r.Subresources {
		out.Subresources = append(out.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  s.Name,
			ResponseKind: &metav1.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind},
			Verbs:        slices.Clone(s.Verbs),
		})
	}
	return out
}

// GroupResources is what discovery serves with extra, as client-go's
// restmapper reads it from the documents (restmapper.GetAPIGroupResources):
// each group with its versions, the preferred first, and each version's
// resources the legacy way.
func GroupResources(extra []Resource) []*restmapper.APIGroupResources {
	var out []*restmapper.APIGroupResources
	for _, g := range servedGroups(extra) {
		gr := &restmapper.APIGroupResources{
			Group:              metav1.APIGroup{Name: g.name},
			VersionedResources: map[string][]metav1.APIResource{},
		}
		for _, v := range g.versions {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: schema.GroupVersion{Group: g.name, Version: v.name}.String(), Version: v.name}
			gr.Group.Versions = append(gr.Group.Versions, gv)
			gr.VersionedResources[v.name] = apiResources(v.resources)
		}
		gr.Group.PreferredVersion = gr.Group.Versions[0]
		out = append(out, gr)
	}
	return out
}
