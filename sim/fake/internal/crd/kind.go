package crd

import (
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Kind is one established CRD, ready to serve. It is safe for concurrent use.
type Kind struct {
	group      string
	names      apiextensionsv1.CustomResourceDefinitionNames
	namespaced bool
	served     []string
	storage    string
	versions   map[string]*version // served or storage versions
}

// version is what serving one version of the CRD needs.
type version struct {
	name         string
	served       bool
	structural   *structuralschema.Structural
	schema       apiservervalidation.SchemaValidator
	cel          *cel.Validator // nil without x-kubernetes-validations
	subresources *apiextensionsv1.CustomResourceSubresources
}

// New builds the schemas and validators of every version crd serves or
// stores. crd is expected to have passed [Validate]; New still refuses what it
// cannot serve: Webhook conversion, no storage version, a version without a
// schema, or a schema that is not structural. Building the CEL validators
// compiles every rule, which is the costly part: a CRD built once in the
// process is not built again.
func New(crd *apiextensionsv1.CustomResourceDefinition) (*Kind, error) {
	key, ok := memoKey(crd)
	if ok {
		if k, ok := kinds.Get(key); ok {
			return k, nil
		}
	}
	k, err := build(crd)
	if err == nil && ok {
		kinds.Put(key, k)
	}
	return k, err
}

func build(crd *apiextensionsv1.CustomResourceDefinition) (*Kind, error) {
	crd = crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter {
		return nil, fmt.Errorf("CustomResourceDefinition %q: conversion strategy %q is not supported, only %q", crd.Name, c.Strategy, apiextensionsv1.NoneConverter)
	}
	if crd.Spec.PreserveUnknownFields {
		return nil, fmt.Errorf("CustomResourceDefinition %q: spec.preserveUnknownFields must be false", crd.Name)
	}

	k := &Kind{
		group:      crd.Spec.Group,
		names:      crd.Spec.Names,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		versions:   make(map[string]*version, len(crd.Spec.Versions)),
	}
	for i, v := range crd.Spec.Versions {
		if v.Storage {
			if k.storage != "" {
				return nil, fmt.Errorf("CustomResourceDefinition %q: more than one storage version", crd.Name)
			}
			k.storage = v.Name
		}
		if !v.Served && !v.Storage {
			continue
		}
		if v.Served {
			k.served = append(k.served, v.Name)
		}
		sv, err := newVersion(&v, field.NewPath("spec", "versions").Index(i))
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %q: %w", crd.Name, err)
		}
		k.versions[v.Name] = sv
	}
	if k.storage == "" {
		return nil, fmt.Errorf("CustomResourceDefinition %q: no storage version", crd.Name)
	}
	return k, nil
}

func newVersion(v *apiextensionsv1.CustomResourceDefinitionVersion, path *field.Path) (*version, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("%s: schema is required", path.Child("schema", "openAPIV3Schema"))
	}
	var in apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &in, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path.Child("schema"), err)
	}
	schemaPath := path.Child("schema", "openAPIV3Schema")
	s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	if errs := structuralschema.ValidateStructural(schemaPath, s); len(errs) > 0 {
		return nil, fmt.Errorf("schema is not structural: %w", errs.ToAggregate())
	}
	// The server prunes defaults on its own copy: NewStructural shares
	// values with the input.
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(in.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", schemaPath, err)
	}
	return &version{
		name:         v.Name,
		served:       v.Served,
		structural:   s,
		schema:       validator,
		cel:          cel.NewValidator(s, true, celconfig.PerCallLimit),
		subresources: v.Subresources.DeepCopy(),
	}, nil
}

// Group is the API group.
func (k *Kind) Group() string { return k.group }

// Resource is the plural resource name, as in URLs.
func (k *Kind) Resource() string { return k.names.Plural }

// Singular is the singular resource name.
func (k *Kind) Singular() string { return k.names.Singular }

// Kind is the object kind.
func (k *Kind) Kind() string { return k.names.Kind }

// ListKind is the kind of a list of objects.
func (k *Kind) ListKind() string { return k.names.ListKind }

// ShortNames are the resource's short names.
func (k *Kind) ShortNames() []string { return slices.Clone(k.names.ShortNames) }

// Categories are the groupings, such as "all", the resource belongs to.
func (k *Kind) Categories() []string { return slices.Clone(k.names.Categories) }

// Namespaced reports whether objects live in a namespace.
func (k *Kind) Namespaced() bool { return k.namespaced }

// Versions are the served versions in the CRD's order. Discovery lists them
// by version priority instead (v1 before v1beta1 before v1alpha1).
func (k *Kind) Versions() []string { return slices.Clone(k.served) }

// StorageVersion is the version objects are stored in.
func (k *Kind) StorageVersion() string { return k.storage }

// HasStatus reports whether version has the status subresource.
func (k *Kind) HasStatus(version string) bool {
	v := k.versions[version]
	return v != nil && v.subresources != nil && v.subresources.Status != nil
}

// Scale returns version's scale subresource, or nil if it has none.
func (k *Kind) Scale(version string) *apiextensionsv1.CustomResourceSubresourceScale {
	v := k.versions[version]
	if v == nil || v.subresources == nil {
		return nil
	}
	return v.subresources.Scale.DeepCopy()
}
