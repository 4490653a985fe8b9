package crd

import (
	"context"
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The calls whose signatures differ between the Kubernetes minors converge
// supports (k8s.io/apiextensions-apiserver v0.35 to v0.37), each written
// once for all of them: a type switch on the function compiles whichever
// signature the module graph selected.

// validateObjectMeta is the server's check of an embedded object's
// metadata: v0.37 added a context first.
func validateObjectMeta(ctx context.Context, obj any, s *structuralschema.Structural) field.ErrorList {
	switch validate := any(schemaobjectmeta.Validate).(type) {
	case func(context.Context, *field.Path, any, *structuralschema.Structural, bool) field.ErrorList: // v0.37
		return validate(ctx, nil, obj, s, false)
	case func(*field.Path, any, *structuralschema.Structural, bool) field.ErrorList: // v0.35, v0.36
		return validate(nil, obj, s, false)
	default:
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("converge does not know this minor of k8s.io/apiextensions-apiserver: its objectmeta.Validate is %T", validate))}
	}
}
