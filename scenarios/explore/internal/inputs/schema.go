package inputs

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
)

// SchemaOf is the structural schema of crd's version, from the object's
// root, as the API server builds it; an error when the version is not
// the CRD's, has no schema, or its schema is not structural.
func SchemaOf(crd *apiextensionsv1.CustomResourceDefinition, version string) (*structuralschema.Structural, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s: version %s has no schema", crd.Name, version)
		}
		var in apiextensions.CustomResourceValidation
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &in, nil); err != nil {
			return nil, fmt.Errorf("CRD %s, version %s: %w", crd.Name, version, err)
		}
		s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s, version %s: %w", crd.Name, version, err)
		}
		if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
			return nil, fmt.Errorf("CRD %s, version %s: the schema is not structural: %v", crd.Name, version, errs.ToAggregate())
		}
		return s, nil
	}
	return nil, fmt.Errorf("CRD %s has no version %s", crd.Name, version)
}

// NoOp says whether changed, obj after a change, is what the API server
// would store for obj anyway: equal to it once both have the schema's
// defaults applied (a defaulted field removed, or set to its default), as
// JSON values: an object read back from a result (its numbers float64) is
// no different from one a run holds (its integers int64). Neither is
// modified.
func NoOp(s *structuralschema.Structural, obj, changed map[string]any) bool {
	a, b := deepCopy(obj), deepCopy(changed)
	structuraldefaulting.Default(a, s)
	structuraldefaulting.Default(b, s)
	return equal(a, b)
}
