package crd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// specProps returns the properties of the first version's spec, to edit.
func specProps(crd *apiextensionsv1.CustomResourceDefinition) map[string]apiextensionsv1.JSONSchemaProps {
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
}

func TestValidate(t *testing.T) {
	// A single-version CRD's schema is reported under spec.validation, as
	// the server does: the internal form holds it there.
	const schemaPath = "spec.validation.openAPIV3Schema"
	established := Established(loadCRD(t, "widgets.yaml"), metav1.Now())
	established.ResourceVersion = "1"

	tests := []struct {
		name   string
		edit   func(crd *apiextensionsv1.CustomResourceDefinition)
		old    *apiextensionsv1.CustomResourceDefinition
		fields []string // fields of the expected errors, in order
		types  []field.ErrorType
		detail string // a part of the first error's message
	}{
		{
			name: "valid create",
			edit: func(*apiextensionsv1.CustomResourceDefinition) {},
		},
		{
			name: "valid update of an established CRD",
			old:  established,
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Names.ShortNames = append(crd.Spec.Names.ShortNames, "wgt")
			},
		},
		{
			name: "property without a type is not structural",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				specProps(crd)["extra"] = apiextensionsv1.JSONSchemaProps{}
			},
			fields: []string{schemaPath + ".properties[spec].properties[extra].type"},
			types:  []field.ErrorType{field.ErrorTypeRequired},
			detail: "must not be empty for specified object fields",
		},
		{
			name: "no storage version",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Versions[0].Storage = false
			},
			fields: []string{"spec.versions", "status.storedVersions"},
			types:  []field.ErrorType{field.ErrorTypeInvalid, field.ErrorTypeInvalid},
			detail: "must have exactly one version marked as storage version",
		},
		{
			name: "name is not plural.group",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Name = "widget.example.com"
			},
			fields: []string{"metadata.name"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: `must be spec.names.plural+"."+spec.group`,
		},
		{
			name: "plural is not a DNS label",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Name = "Widgets.example.com"
				crd.Spec.Names.Plural = "Widgets"
			},
			fields: []string{"metadata.name", "spec.names.plural"},
			types:  []field.ErrorType{field.ErrorTypeInvalid, field.ErrorTypeInvalid},
			detail: "a lowercase RFC 1123 subdomain",
		},
		{
			name: "CEL rule that does not compile",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].XValidations[0].Rule = "self.replicas <="
			},
			fields: []string{schemaPath + ".properties[spec].x-kubernetes-validations[0].rule"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: "compilation failed",
		},
		{
			// The server's cost estimate puts no bound on string(int), so
			// concatenating it is refused however small the numbers.
			name: "messageExpression over the estimated cost budget",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				limits := specProps(crd)["limits"]
				limits.XValidations[0].MessageExpression = "'min ' + string(self.min) + ' exceeds max'"
				specProps(crd)["limits"] = limits
			},
			fields: []string{
				schemaPath + ".properties[spec].properties[limits].x-kubernetes-validations[0].messageExpression",
				schemaPath + ".properties[spec].properties[limits].x-kubernetes-validations[0].messageExpression",
				schemaPath,
			},
			types:  []field.ErrorType{field.ErrorTypeForbidden, field.ErrorTypeForbidden, field.ErrorTypeForbidden},
			detail: "estimated messageExpression cost exceeds budget",
		},
		{
			name: "default that breaks its own schema",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				replicas := specProps(crd)["replicas"]
				replicas.Default = &apiextensionsv1.JSON{Raw: []byte(`11`)}
				specProps(crd)["replicas"] = replicas
			},
			fields: []string{schemaPath + ".properties[spec].properties[replicas].default"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: "should be less than or equal to 10",
		},
		{
			name:   "scope is immutable",
			old:    established,
			edit:   func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Scope = apiextensionsv1.ClusterScoped },
			fields: []string{"spec.scope"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: "field is immutable",
		},
		{
			name:   "names of an established CRD are immutable",
			old:    established,
			edit:   func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Names.Kind = "Gizmo" },
			fields: []string{"spec.names.kind"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: "field is immutable",
		},
		{
			name:   "a stored version cannot be dropped",
			old:    established,
			edit:   func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Name = "v2" },
			fields: []string{"status.storedVersions[0]"},
			types:  []field.ErrorType{field.ErrorTypeInvalid},
			detail: "v1 was previously a storage version",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var crd *apiextensionsv1.CustomResourceDefinition
			if tt.old != nil {
				crd = tt.old.DeepCopy()
			} else {
				crd = loadCRD(t, "widgets.yaml")
			}
			tt.edit(crd)
			errs := Validate(context.Background(), crd, tt.old)

			fields := make([]string, len(errs))
			types := make([]field.ErrorType, len(errs))
			for i, err := range errs {
				fields[i], types[i] = err.Field, err.Type
			}
			if len(tt.fields) == 0 {
				require.Empty(t, messages(errs))
				return
			}
			assert.Equal(t, tt.fields, fields, messages(errs))
			assert.Equal(t, tt.types, types)
			assert.Contains(t, errs[0].Error(), tt.detail)
		})
	}
}

func TestValidateDoesNotModify(t *testing.T) {
	crd := loadCRD(t, "widgets.yaml")
	crd.Status.StoredVersions = []string{"v9"}
	want := crd.DeepCopy()
	// The server clears the status of a CRD being created, so a bogus one
	// in the request does not count.
	require.Empty(t, Validate(context.Background(), crd, nil))
	assert.Equal(t, want, crd)
}

func TestDefault(t *testing.T) {
	crd := loadCRD(t, "gadgets.yaml")
	size := crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]
	size.Default = &apiextensionsv1.JSON{Raw: []byte(" 2 ")}
	crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = size
	enum := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Enum: []apiextensionsv1.JSON{{Raw: []byte(`{ "b": 1,  "a": [ 1, 2 ] }`)}},
	}
	crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"] = enum

	Default(crd)

	assert.Equal(t, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}, crd.Spec.Conversion)
	assert.Equal(t, "gadget", crd.Spec.Names.Singular)
	assert.Equal(t, "GadgetList", crd.Spec.Names.ListKind)
	assert.Equal(t, []string{"v1"}, crd.Status.StoredVersions)
	assert.Equal(t, "apiextensions.k8s.io/v1", crd.APIVersion)
	spec := crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, "2", string(spec.Properties["size"].Default.Raw))
	assert.Equal(t, `{"a":[1,2],"b":1}`, string(spec.Properties["shape"].Enum[0].Raw), "raw JSON reads back as the server stores it")
	// Each version keeps its own schema: the internal form lifts only
	// schemas shared by all versions.
	assert.Nil(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"].Default)
	assert.Empty(t, Validate(context.Background(), crd, nil))
}

func TestEstablished(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	later := metav1.NewTime(created.Add(time.Hour))
	crd := loadCRD(t, "widgets.yaml")
	Default(crd)
	before := crd.DeepCopy()

	got := Established(crd, created)

	assert.Equal(t, before, crd, "Established returns a copy")
	assert.Equal(t, apiextensionsv1.CustomResourceDefinitionNames{
		Plural:     "widgets",
		Singular:   "widget",
		ShortNames: []string{"wg"},
		Kind:       "Widget",
		ListKind:   "WidgetList",
		Categories: []string{"all", "toys"},
	}, got.Status.AcceptedNames)
	assert.Equal(t, []apiextensionsv1.CustomResourceDefinitionCondition{
		{
			Type:               apiextensionsv1.NamesAccepted,
			Status:             apiextensionsv1.ConditionTrue,
			LastTransitionTime: created,
			Reason:             "NoConflicts",
			Message:            "no conflicts found",
		},
		{
			Type:               apiextensionsv1.Established,
			Status:             apiextensionsv1.ConditionTrue,
			LastTransitionTime: created,
			Reason:             "InitialNamesAccepted",
			Message:            "the initial names have been accepted",
		},
	}, got.Status.Conditions)
	assert.Equal(t, []string{"v1"}, got.Status.StoredVersions)

	// A new storage version adds to storedVersions; conditions that stay
	// true keep their transition time.
	update := got.DeepCopy()
	update.Spec.Versions[0].Storage = false
	update.Spec.Versions = append(update.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
		Name: "v2", Served: true, Storage: true, Schema: update.Spec.Versions[0].Schema,
	})
	update.Spec.Names.ShortNames = []string{"wg", "wgt"}
	again := Established(update, later)
	assert.Equal(t, []string{"v1", "v2"}, again.Status.StoredVersions)
	assert.Equal(t, []string{"wg", "wgt"}, again.Status.AcceptedNames.ShortNames)
	require.Len(t, again.Status.Conditions, 2)
	for _, c := range again.Status.Conditions {
		assert.Equal(t, created, c.LastTransitionTime, c.Type)
	}

	// A condition that flips to true records the new time.
	installing := got.DeepCopy()
	installing.Status.Conditions[1].Status = apiextensionsv1.ConditionFalse
	installing.Status.Conditions[1].Reason = "Installing"
	flipped := Established(installing, later)
	assert.Equal(t, later, flipped.Status.Conditions[1].LastTransitionTime)
	assert.Equal(t, "InitialNamesAccepted", flipped.Status.Conditions[1].Reason)
	assert.Equal(t, created, flipped.Status.Conditions[0].LastTransitionTime)
}
