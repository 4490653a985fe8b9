// Package v1alpha1 is the WebApp API, group examples.converge.dev, version
// v1alpha1: the Go types of the custom resource the webapp example operator
// reconciles.
//
// The types are written by hand, deep copies included. The schema the API
// server enforces (defaults, bounds, the CEL rule) lives in
// examples/webapp/config/crd/webapps.yaml, not in markers on these types;
// the example's tests check that the two agree.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "examples.converge.dev", Version: "v1alpha1"}

// AddToScheme registers WebApp and WebAppList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
