package crd

import (
	"context"
	"fmt"
	"math"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// Admit prepares obj, a create (old == nil) or an update of old, written in
// version, for storing as the server does. It fills in a missing apiVersion
// and kind and checks them, prunes unknown fields (metadata down to
// ObjectMeta) and applies the schema's defaults. It then validates against
// the OpenAPI schema, the scale subresource's replica paths, embedded
// resources, list-type invariants and the x-kubernetes-validations rules, with
// the server's CEL cost limits. On update, old is brought to version first,
// transition rules see it as oldSelf, and errors in parts left unchanged are
// ratcheted away as on the server.
//
// obj is modified in place, old is not. The errors are the causes of the
// server's 422 response, with its paths and messages.
func (k *Kind) Admit(ctx context.Context, version string, obj, old *unstructured.Unstructured) field.ErrorList {
	v := k.versions[version]
	if v == nil || !v.served {
		return field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), obj.GetAPIVersion(), k.servedGroupVersions())}
	}
	// The server decodes a body with the request's apiVersion and kind as
	// defaults for what it leaves out.
	gv := schema.GroupVersion{Group: k.group, Version: version}.String()
	if obj.GetAPIVersion() == "" {
		obj.SetAPIVersion(gv)
	}
	if obj.GetKind() == "" {
		obj.SetKind(k.names.Kind)
	}
	if errs := k.validateTypeMeta(obj, gv); len(errs) > 0 {
		return errs
	}
	if _, ferr := v.coerce(obj.Object, coercion{defaults: true}); ferr != nil {
		return field.ErrorList{ferr}
	}
	if old == nil {
		return v.validate(ctx, obj.Object, nil)
	}
	return v.validate(ctx, obj.Object, k.oldIn(old, v))
}

// Coerce prunes and defaults obj against the schema of its own version, as
// the server does to every object it reads from storage; so an object stored
// before a default was added to the CRD reads back with it. Metadata fields of
// the wrong type are dropped. It returns the paths of the unknown fields it
// pruned, which the server reports as warnings or, for a strict write, as
// errors. Pruning and defaulting are idempotent.
func (k *Kind) Coerce(obj *unstructured.Unstructured) (unknownFields []string, err error) {
	v, err := k.versionOf(obj)
	if err != nil {
		return nil, err
	}
	unknownFields, ferr := v.coerce(obj.Object, coercion{dropMalformed: true, defaults: true})
	if ferr != nil {
		return nil, ferr
	}
	return unknownFields, nil
}

// Convert moves obj to version, which must be served or the storage version,
// as the server's None conversion does: only apiVersion changes, then fields
// the target schema does not know are pruned. It applies no defaults: the
// server defaults an object in the version it is decoded in, before
// converting it.
func (k *Kind) Convert(obj *unstructured.Unstructured, version string) error {
	v := k.versions[version]
	if v == nil {
		return fmt.Errorf("%s has no version %s", schema.GroupResource{Group: k.group, Resource: k.names.Plural}, version)
	}
	if gv, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err != nil || gv.Group != k.group {
		return fmt.Errorf("cannot convert apiVersion %q to group %q", obj.GetAPIVersion(), k.group)
	}
	obj.SetAPIVersion(schema.GroupVersion{Group: k.group, Version: version}.String())
	if _, ferr := v.coerce(obj.Object, coercion{}); ferr != nil {
		return ferr
	}
	return nil
}

// versionOf returns the version obj's apiVersion names.
func (k *Kind) versionOf(obj *unstructured.Unstructured) (*version, error) {
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return nil, err
	}
	if gv.Group != k.group || k.versions[gv.Version] == nil {
		return nil, fmt.Errorf("apiVersion %q is not a version of %s", obj.GetAPIVersion(), schema.GroupResource{Group: k.group, Resource: k.names.Plural})
	}
	return k.versions[gv.Version], nil
}

// oldIn returns a copy of old as the server sees it when validating an update
// in v: read from storage, then converted to v.
func (k *Kind) oldIn(old *unstructured.Unstructured, v *version) map[string]any {
	prev := old.DeepCopy()
	from, err := k.versionOf(prev)
	if err == nil {
		// Storage decoding drops what it cannot read rather than fail.
		_, _ = from.coerce(prev.Object, coercion{dropMalformed: true, defaults: true})
	}
	if from != v {
		prev.SetAPIVersion(schema.GroupVersion{Group: k.group, Version: v.name}.String())
		_, _ = v.coerce(prev.Object, coercion{dropMalformed: true})
	}
	return prev.Object
}

func (k *Kind) servedGroupVersions() []string {
	gvs := make([]string, len(k.served))
	for i, v := range k.served {
		gvs[i] = schema.GroupVersion{Group: k.group, Version: v}.String()
	}
	return gvs
}

// validateTypeMeta is the server's first check: with a wrong apiVersion or
// kind nothing else is looked at.
func (k *Kind) validateTypeMeta(obj *unstructured.Unstructured, groupVersion string) field.ErrorList {
	var errs field.ErrorList
	if kind := obj.GetKind(); kind != k.names.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+k.names.Kind))
	}
	if apiVersion := obj.GetAPIVersion(); apiVersion != groupVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+groupVersion))
	}
	return errs
}

// coercion says how to coerce: the server drops malformed metadata only when
// it decodes from storage, and defaults only after decoding, not converting.
type coercion struct {
	dropMalformed bool
	defaults      bool
}

// coerce is what the server does to an object each time it decodes or
// converts one: metadata round-trips through ObjectMeta, unknown fields are
// pruned (apiVersion and kind are kept at the root), nulls the schema does not allow and cannot default are removed,
// embedded resources are coerced, and then, if asked, defaults are applied.
func (v *version) coerce(obj map[string]any, c coercion) ([]string, *field.Error) {
	meta, hasMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields:     c.dropMalformed,
		ReturnUnknownFieldPaths: true,
	})
	if err != nil {
		return nil, field.Invalid(field.NewPath("metadata"), obj["metadata"], err.Error())
	}

	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, v.structural)
	ferr, embedded := schemaobjectmeta.CoerceWithOptions(nil, obj, v.structural, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields:       c.dropMalformed,
		ReturnUnknownFieldPaths: true,
	})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, embedded...)

	if hasMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, field.Invalid(field.NewPath("metadata"), obj["metadata"], err.Error())
		}
		// ObjectMeta writes a zero creationTimestamp as null; the server
		// always sets one before storing, so drop the placeholder.
		if meta.CreationTimestamp.IsZero() {
			unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
		}
	}

	if c.defaults {
		structuraldefaulting.Default(obj, v.structural)
	}
	return unknown, nil
}

// validate runs the server's checks of a custom resource, in its order; old
// is nil on create.
func (v *version) validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	var (
		errs       field.ErrorList
		celOptions []cel.Option
	)
	errs = apiservervalidation.ValidateCustomResource(nil, obj, v.schema)
	if old != nil {
		correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: v.structural})
		// Ratcheting only forgives errors of values the update left as they
		// were, and builds a validator for every node: it runs only on an
		// update the plain validation refuses.
		if len(errs) > 0 {
			errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, v.schema, apiservervalidation.WithRatcheting(correlated))
		}
		celOptions = append(celOptions, cel.WithRatcheting(correlated))
	}
	if v.subresources != nil && v.subresources.Scale != nil {
		errs = append(errs, v.validateScale(obj)...)
	}
	errs = append(errs, validateObjectMeta(ctx, obj, v.structural)...)
	// List invariants ratchet as a whole: an old object that broke them
	// lets the new one break them too.
	if old == nil || len(structurallisttype.ValidateListSetsAndMaps(nil, v.structural, old)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	}

	if v.cel == nil {
		return errs
	}
	if blocked := celBlockedBy(errs); blocked != nil {
		return append(errs, blocked)
	}
	// On create oldSelf must be absent, not a nil map.
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, oldObj, celconfig.RuntimeCELCostBudget, celOptions...)
	return append(errs, celErrs...)
}

// celBlockedBy returns the error the server adds instead of running CEL rules
// when the object is too far off its schema for them to run safely.
func celBlockedBy(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// validateScale checks what the scale subresource reads from the object:
// replica counts that fit an int32 and a string label selector. Paths are the
// CRD's JSON paths, as the server reports them.
func (v *version) validateScale(obj map[string]any) field.ErrorList {
	scale := v.subresources.Scale
	var errs field.ErrorList
	for _, p := range []string{scale.SpecReplicasPath, scale.StatusReplicasPath} {
		n, _, err := unstructured.NestedInt64(obj, jsonPathFields(p)...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(p), n, err.Error()))
		case n < 0:
			errs = append(errs, field.Invalid(field.NewPath(p), n, "should be a non-negative integer"))
		case n > math.MaxInt32:
			errs = append(errs, field.Invalid(field.NewPath(p), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
		}
	}
	if p := scale.LabelSelectorPath; p != nil {
		if s, _, err := unstructured.NestedString(obj, jsonPathFields(*p)...); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*p), s, err.Error()))
		}
	}
	return errs
}

// jsonPathFields splits a scale subresource path such as ".spec.replicas".
func jsonPathFields(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}
