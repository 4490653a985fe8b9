package inputs

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"sigs.k8s.io/yaml"
)

// schemaOf is the structural schema of a custom resource whose spec has
// the schema written in YAML, built as the server builds it from a CRD.
func schemaOf(t *testing.T, specYAML string) *structuralschema.Structural {
	t.Helper()
	var spec apiextensionsv1.JSONSchemaProps
	require.NoError(t, yaml.UnmarshalStrict([]byte(specYAML), &spec))
	root := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       spec,
		},
	}
	var in apiextensions.CustomResourceValidation
	require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(
		&apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root}, &in, nil))
	s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
	require.NoError(t, err)
	require.Empty(t, structuralschema.ValidateStructural(nil, s), "the test's schema must be structural")
	return s
}

// object is a custom resource with this spec.
func object(spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Pool",
		"metadata":   map[string]any{"name": "p"},
		"spec":       spec,
	}
}

func changes(t *testing.T, s *structuralschema.Structural, obj map[string]any, r Rules) []Change {
	t.Helper()
	cs, err := Changes(s, obj, "spec", r, nil)
	require.NoError(t, err)
	return cs
}

// at is the changes at path.
func at(cs []Change, path string) []Change {
	var out []Change
	for _, c := range cs {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

func valid(cs []Change) []Change   { return filter(cs, false) }
func invalid(cs []Change) []Change { return filter(cs, true) }

func filter(cs []Change, invalid bool) []Change {
	var out []Change
	for _, c := range cs {
		if c.Invalid == invalid {
			out = append(out, c)
		}
	}
	return out
}

// sets is the values cs set.
func sets(cs []Change) []any {
	var out []any
	for _, c := range cs {
		if c.Op == OpSet {
			out = append(out, c.Value)
		}
	}
	return out
}

// ops is each change's path and op.
func ops(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path+" "+string(c.Op))
	}
	return out
}
