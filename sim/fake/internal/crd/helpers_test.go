package crd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// loadCRD reads a CRD from testdata.
func loadCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(data, &crd))
	return &crd
}

// newKind builds the Kind of a testdata CRD.
func newKind(t testing.TB, name string) *Kind {
	t.Helper()
	k, err := New(loadCRD(t, name))
	require.NoError(t, err)
	return k
}

// object parses a custom resource written as YAML, the way a request body
// becomes an unstructured object.
func object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	m, ok := value(t, doc).(map[string]any)
	require.True(t, ok, "not an object: %s", doc)
	return &unstructured.Unstructured{Object: m}
}

// value parses a JSON value written as YAML, with integers as int64 as the
// server decodes them.
func value(t testing.TB, doc string) any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(data, &v))
	return v
}

// messages renders errors as the server lists the causes of a 422.
func messages(errs field.ErrorList) []string {
	var out []string
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}
