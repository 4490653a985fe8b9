// Package v1alpha1 is the examples.converge.dev/v1alpha1 API of the mirror
// example: the Mirror kind, which copies a ConfigMap's data into others.
//
// +k8s:deepcopy-gen=package
// +groupName=examples.converge.dev
package v1alpha1
