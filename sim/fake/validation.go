package fake

import (
	"strconv"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// nameRules are the resources whose metadata.name kube-apiserver checks with
// another rule than a DNS-1123 subdomain, the rule of every other built-in
// kind and of custom resources.
var nameRules = map[schema.GroupResource]apivalidation.ValidateNameFunc{
	{Resource: "namespaces"}: apivalidation.ValidateNamespaceName,
	// A DNS-1123 label since RelaxedServiceNameValidation went GA in 1.37;
	// a DNS-1035 label (no leading digit) before.
	{Resource: "services"}: apivalidation.NameIsDNSLabel,
	// core/v1 Events keep their legacy validation, which leaves the name to
	// the generic path-segment check; events.k8s.io Events are subdomains.
	{Resource: "events"}: pathSegmentName,
	{Group: "rbac.authorization.k8s.io", Resource: "roles"}:               rbacName,
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        rbacName,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        rbacName,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: rbacName,
}

func nameRule(gr schema.GroupResource) apivalidation.ValidateNameFunc {
	if rule, ok := nameRules[gr]; ok {
		return rule
	}
	return apivalidation.NameIsDNSSubdomain
}

// pathSegmentName is the check every name gets, so that it fits in a URL.
// The functions of validation/path are deprecated from client-go v0.37 on,
// for a package v0.35 lacks; they are in every minor converge supports.
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return path.IsValidPathSegmentPrefix(name)
	}
	return path.IsValidPathSegmentName(name)
}

// rbacName is a path segment, generateName included.
func rbacName(name string, _ bool) []string { return pathSegmentName(name, false) }

// validateCreate checks an object's metadata, after name generation, as the
// API server does on create: the name by its resource's rule, and the
// namespace, labels, annotations, finalizers and owner references.
func validateCreate(gr schema.GroupResource, m metav1.Object, namespaced bool) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessor(m, namespaced, nameRule(gr), field.NewPath("metadata"))
}

// maxGeneratedNameLength is where the API server cuts a generateName, so
// that with its 5-character suffix the name still fits in a DNS label.
const maxGeneratedNameLength = 63 - 5

// generateName appends a suffix to base as the API server does, from a
// count rather than at random, so that runs replay.
func generateName(base string, n int64) string {
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return base + strconv.FormatInt(n, 36)
}
