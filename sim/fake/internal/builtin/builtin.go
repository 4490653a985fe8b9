// Package builtin is the fake API server's knowledge of the resources a real
// one serves: the built-in resources of kube-apiserver v1.37.2 with its
// default feature gates and API groups, as discovery describes them, and the
// discovery documents built from them (/api, /apis, /api/v1,
// /apis/<group>/<version>, in both the legacy and the aggregated form).
//
// The table is data, not derived from a scheme: TestTableMatchesAPIServer
// holds it to a real kube-apiserver of that version, entry by entry.
//
// The discovery builders take extra: custom resources served beside the
// built-ins, e.g. one per served version of each established CRD. Built-in
// groups list only the built-ins, as kube-apiserver lists those groups
// itself: an extra resource of a built-in group (or of the core group) is
// left out. The groups of extra follow the built-in ones by name, as the
// aggregator orders groups of equal priority (every CRD group has the same);
// a group's versions come highest first by Kubernetes version priority (v2,
// v1, v1beta1), the first being the preferred one; a version's resources
// come by name, as apiextensions-apiserver orders them. extra is not
// changed, and every builder returns fresh values.
//
// Limits:
//   - Only resources whose kinds client-go's scheme registers are in the
//     table: apiextensions.k8s.io and apiregistration.k8s.io, which the
//     server also serves, are not, and built against a client-go older
//     than the server, neither are the kinds that client-go does not have
//     yet (v0.35 lacks six of v1.37's: ClusterTrustBundle and
//     PodCertificateRequest of certificates.k8s.io/v1,
//     MutatingAdmissionPolicy and its binding of
//     admissionregistration.k8s.io/v1, DeviceTaintRule of
//     resource.k8s.io/v1, and storagemigration.k8s.io/v1).
//     Alpha and beta versions are off by default on the server and absent
//     here too.
//   - Discovery carries no storageVersionHash: it names a storage version,
//     and the fake has no storage to migrate.
//   - /api carries no serverAddressByClientCIDRs: the address is the
//     serving side's to add.
//   - A custom resource's aggregated responseKind carries its kind alone,
//     as a built-in's does, where apiextensions-apiserver also names the
//     group-version (which client-go copies into APIResource.Group and
//     Version).
//   - apiextensions.k8s.io, passed as extra, is placed among the custom
//     groups by name, where the server lists it among its own.
package builtin

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// table is what the fake serves: the server's resources (served) whose
// kinds the client-go it is built with can decode. Built against an older
// client-go, a kind the server added since (certificates.k8s.io/v1
// ClusterTrustBundle is v1beta1 in client-go v0.35) is left out, and so is
// a subresource whose kind it lacks.
var table = decodable(served, func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		panic(err) // client-go's own types: cannot fail
	}
	return s
}())

func decodable(rs []Resource, s *runtime.Scheme) []Resource {
	var out []Resource
	for _, r := range rs {
		gv := r.GVR.GroupVersion()
		if !s.Recognizes(gv.WithKind(r.Kind)) {
			continue
		}
		r = r.clone()
		r.Subresources = slices.DeleteFunc(r.Subresources, func(sub Subresource) bool {
			sgv := schema.GroupVersion{Group: sub.Group, Version: sub.Version}
			if sgv.Empty() {
				sgv = gv
			}
			return !s.Recognizes(sgv.WithKind(sub.Kind))
		})
		out = append(out, r)
	}
	return out
}

// Resource is one top-level resource as discovery describes it.
type Resource struct {
	GVR          schema.GroupVersionResource
	Kind         string   // e.g. "Deployment"
	Singular     string   // e.g. "deployment"
	Namespaced   bool     // false for cluster-scoped resources
	Verbs        []string // sorted, as discovery lists them
	ShortNames   []string
	Categories   []string
	Subresources []Subresource // in the order discovery lists them
}

// Subresource is one subresource of a Resource, e.g. deployments/scale.
type Subresource struct {
	Name string // e.g. "scale"
	Kind string // the kind its requests and responses carry, e.g. "Scale"
	// Group and Version name the kind's group-version when it is not the
	// parent's (autoscaling/v1 for scale): empty means the parent's.
	Group   string
	Version string
	Verbs   []string
}

// All returns every built-in resource, grouped by group-version in the
// order the server's discovery lists them ("" v1 first, then /apis's
// order). The slice and its contents are the caller's to change.
func All() []Resource {
	out := make([]Resource, len(table))
	for i, r := range table {
		out[i] = r.clone()
	}
	return out
}

// Lookup finds a top-level resource by GVR: "deployments", not
// "deployments/scale".
func Lookup(gvr schema.GroupVersionResource) (Resource, bool) {
	i, ok := byGVR[gvr]
	if !ok {
		return Resource{}, false
	}
	return table[i].clone(), true
}

// ByKind finds a top-level resource by the kind it serves. Kinds only
// subresources serve (Scale, Eviction, TokenRequest, PodExecOptions...) are
// not found: each belongs to several resources.
func ByKind(gvk schema.GroupVersionKind) (Resource, bool) {
	i, ok := byGVK[gvk]
	if !ok {
		return Resource{}, false
	}
	return table[i].clone(), true
}

// PreferredVersions maps each built-in group to its preferred version, as
// /apis lists them, and "" (the core group of /api) to "v1". The server
// lists a group's versions preferred first, and so does the table.
func PreferredVersions() map[string]string {
	out := map[string]string{}
	for _, r := range table {
		if _, ok := out[r.GVR.Group]; !ok {
			out[r.GVR.Group] = r.GVR.Version
		}
	}
	return out
}

var (
	byGVR = index(func(r Resource) schema.GroupVersionResource { return r.GVR })
	byGVK = index(func(r Resource) schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) })
)

func index[K comparable](key func(Resource) K) map[K]int {
	m := make(map[K]int, len(table))
	for i, r := range table {
		m[key(r)] = i
	}
	return m
}

// clone copies r deeply: the table's verb sets are shared between entries.
func (r Resource) clone() Resource {
	r.Verbs = slices.Clone(r.Verbs)
	r.ShortNames = slices.Clone(r.ShortNames)
	r.Categories = slices.Clone(r.Categories)
	r.Subresources = slices.Clone(r.Subresources)
	for i := range r.Subresources {
		r.Subresources[i].Verbs = slices.Clone(r.Subresources[i].Verbs)
	}
	return r
}
