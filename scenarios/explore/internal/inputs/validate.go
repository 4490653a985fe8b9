package inputs

import (
	"context"
	"errors"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/converge-lab/converge/internal/bounded"
)

// A Validator checks a custom resource against its structural schema with
// the API server's own libraries: the OpenAPI value validations (bounds,
// enums, lengths, patterns, formats, required fields, item and property
// counts), the list-type invariants (unique set items and map keys), and
// the x-kubernetes-validations CEL rules with the server's cost limits. An
// update is judged as the server judges it: transition rules see the old
// object as oldSelf, and errors in parts left unchanged are ratcheted away.
//
// It does not prune unknown fields nor apply defaults first, as the server
// does, and it does not check metadata, embedded resources' metadata, or
// a scale subresource's replica paths.
type Validator struct {
	s      *structuralschema.Structural
	schema apiservervalidation.SchemaValidator
	cel    *cel.Validator // nil when the schema has no rules
}

// NewValidator returns the Validator of the objects whose schema, from the
// root, is s.
func NewValidator(s *structuralschema.Structural) (*Validator, error) {
	if s == nil {
		return nil, errors.New("no schema")
	}
	if v, ok := validators.Get(s); ok {
		return v, nil
	}
	v := &Validator{
		s:      s,
		schema: apiservervalidation.NewSchemaValidatorFromOpenAPI(s.ToKubeOpenAPI()),
		cel:    cel.NewValidator(s, true, celconfig.PerCallLimit),
	}
	validators.Put(s, v)
	return v, nil
}

// validators are the Validators made last, by schema: a plan checks each
// chain of changes it draws against its object's schema, and making a
// Validator compiles the schema's CEL rules. A Validator is safe for
// concurrent use; holding its schema, it keeps the key's pointer from
// being reused.
var validators = bounded.Map[*structuralschema.Structural, *Validator]{Limit: 16}

// Validate returns why the server would refuse obj, as an update of old or,
// when old is nil, as a create; nil when it would not.
func (v *Validator) Validate(obj, old map[string]any) error {
	return v.errors(obj, old).ToAggregate()
}

func (v *Validator) errors(obj, old map[string]any) field.ErrorList {
	var (
		errs       field.ErrorList
		celOptions []cel.Option
	)
	if old == nil {
		errs = apiservervalidation.ValidateCustomResource(nil, obj, v.schema)
	} else {
		correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: v.s})
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, v.schema, apiservervalidation.WithRatcheting(correlated))
		celOptions = append(celOptions, cel.WithRatcheting(correlated))
	}
	// List invariants ratchet as a whole, as on the server: an old object
	// that broke them lets the new one break them too.
	if old == nil || len(structurallisttype.ValidateListSetsAndMaps(nil, v.s, old)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.s, obj)...)
	}
	if v.cel == nil {
		return errs
	}
	// The server runs no rule over an object too far off its schema.
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return errs
		}
	}
	// On create oldSelf must be absent, not a nil map.
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.s, obj, oldObj, celconfig.RuntimeCELCostBudget, celOptions...)
	return append(errs, celErrs...)
}
