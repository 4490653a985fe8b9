package apply

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
)

// ForCRD returns the manager for one served version of a CRD. Its objects are
// *unstructured.Unstructured. The type information is built as
// apiextensions-apiserver builds it for apply, from the OpenAPI models of all
// the CRD's versions, so list types, map keys and
// x-kubernetes-preserve-unknown-fields shape ownership as on the server.
// A version without a structural schema is refused (a v1 CRD always has one).
func ForCRD(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Manager, error) {
	if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == version }) {
		return nil, fmt.Errorf("CRD %s has no version %q", crd.Name, version)
	}
	if err := checkStructural(crd, version); err != nil {
		return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, version, err)
	}
	specs := make([]*spec3.OpenAPI, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s: OpenAPI models: %w", crd.Name, v.Name, err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: OpenAPI models: %w", crd.Name, err)
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	subresources, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	return newManager(typeInfo{
		gvk:           gvk,
		hasStatus:     subresources != nil && subresources.Status != nil,
		typeConverter: tc,
		convertor:     noneConvertor{gk: gvk.GroupKind()},
		defaulter:     noDefaults{},
		creater:       unstructuredCreater{},
		crd:           true,
	})
}

// checkStructural refuses what the OpenAPI builder would silently treat as
// schemaless.
func checkStructural(crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	v, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return err
	}
	if v == nil || v.OpenAPIV3Schema == nil {
		return errors.New("no schema")
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.OpenAPIV3Schema, internal, nil); err != nil {
		return err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return fmt.Errorf("schema is not structural: %w", err)
	}
	if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
		return fmt.Errorf("schema is not structural: %w", errs.ToAggregate())
	}
	return nil
}

// noneConvertor converts a custom resource between versions the way the
// None conversion strategy does: only apiVersion changes.
type noneConvertor struct{ gk schema.GroupKind }

func (c noneConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("%s: unsupported conversion from %T to %T", c.gk, in, out)
}

func (c noneConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%s: cannot convert %T", c.gk, in)
	}
	from := u.GroupVersionKind()
	if from.GroupKind() != c.gk {
		return nil, fmt.Errorf("%s: cannot convert a %v", c.gk, from)
	}
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok {
		return nil, fmt.Errorf("%s: cannot convert %v to %v", c.gk, from, target)
	}
	if to == from {
		return u, nil
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(to)
	return out, nil
}

func (c noneConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return "", "", fmt.Errorf("%v: field label %q is not supported", gvk, label)
}

// noDefaults: the caller defaults custom resources from their schema.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
