package apply

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// widgetCRD has the shapes that decide ownership: a scalar, a list-map keyed
// by name, a preserve-unknown-fields subtree, and a status subresource.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              ready: {type: integer}
`

const widgetHead = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: ns}
`

const (
	aliceWidget = widgetHead + `spec:
  replicas: 2
  ports: [{name: http, port: 80}]
  config: {a: 1, b: {c: 2}}
`
	aliceWidgetFields = `{"f:spec":{"f:config":{"f:a":{},"f:b":{".":{},"f:c":{}}},` +
		`"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}},"f:replicas":{}}}`
	httpsPortFields = `{"f:spec":{"f:ports":{"k:{\"name\":\"https\"}":{".":{},"f:name":{},"f:port":{}}}}}`
)

func widgetCRDObject(tb testing.TB) *apiextensionsv1.CustomResourceDefinition {
	tb.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(tb, yaml.UnmarshalStrict([]byte(widgetCRD), crd))
	return crd
}

func widgets(t *testing.T) *Manager {
	t.Helper()
	m, err := ForCRD(widgetCRDObject(t), "v1")
	require.NoError(t, err)
	return m
}

func newWidget() runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	return u
}

func nested(t *testing.T, obj runtime.Object, path ...string) any {
	t.Helper()
	u, ok := obj.(*unstructured.Unstructured)
	require.True(t, ok, "got %T", obj)
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	require.NoError(t, err)
	return v
}

func TestCustomResource(t *testing.T) {
	setField := func(v any, path ...string) func(runtime.Object) {
		return func(obj runtime.Object) {
			if err := unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, v, path...); err != nil {
				panic(err)
			}
		}
	}
	tests := []struct {
		name  string
		steps []step
		check func(t *testing.T, obj runtime.Object)
	}{{
		name:  "apply creates",
		steps: []step{{manager: "alice", patch: aliceWidget}},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, newWidget().GetObjectKind().GroupVersionKind(), obj.GetObjectKind().GroupVersionKind())
			assert.Equal(t, int64(2), nested(t, obj, "spec", "replicas"))
			assert.Equal(t, "w", nested(t, obj, "metadata", "name"))
			assert.Equal(t, []string{"alice/Apply/example.com/v1/"}, managers(t, obj))
			assert.JSONEq(t, aliceWidgetFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a second apply by the same manager changes a field",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "alice", patch: strings.Replace(aliceWidget, "replicas: 2", "replicas: 5", 1)},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int64(5), nested(t, obj, "spec", "replicas"))
			assert.Equal(t, []string{"alice/Apply/example.com/v1/"}, managers(t, obj))
		},
	}, {
		name: "another manager's apply of an owned field conflicts",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "bob", patch: widgetHead + "spec: {replicas: 3}\n", wantCode: 409,
				wantCauses: []metav1.StatusCause{conflict(".spec.replicas", `"alice"`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int64(2), nested(t, obj, "spec", "replicas"))
		},
	}, {
		name: "force takes ownership",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "bob", patch: widgetHead + "spec: {replicas: 3}\n", force: true},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int64(3), nested(t, obj, "spec", "replicas"))
			assert.JSONEq(t, replicasFields, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
			assert.NotContains(t, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""), "f:replicas")
		},
	}, {
		name: "an update by a non-apply manager, then an apply conflicts",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "scaler", write: setField(int64(7), "spec", "replicas")},
			{manager: "alice", patch: aliceWidget, wantCode: 409,
				wantCauses: []metav1.StatusCause{conflict(".spec.replicas", `"scaler" using example.com/v1`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int64(7), nested(t, obj, "spec", "replicas"))
			assert.JSONEq(t, replicasFields, owned(t, obj, "scaler", metav1.ManagedFieldsOperationUpdate, ""))
		},
	}, {
		name: "list-map entries are owned by key",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "bob", patch: widgetHead + "spec: {ports: [{name: https, port: 443}]}\n"},
			{manager: "bob", patch: widgetHead + "spec: {ports: [{name: http, port: 8080}]}\n", wantCode: 409,
				wantCauses: []metav1.StatusCause{conflict(`.spec.ports[name="http"].port`, `"alice"`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, []any{
				map[string]any{"name": "http", "port": int64(80)},
				map[string]any{"name": "https", "port": int64(443)},
			}, nested(t, obj, "spec", "ports"))
			assert.JSONEq(t, httpsPortFields, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "removing fields and list-map entries from the applied configuration removes them",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "bob", patch: widgetHead + "spec: {ports: [{name: https, port: 443}]}\n"},
			{manager: "alice", patch: widgetHead + "spec: {replicas: 2, config: {b: {c: 2}}}\n"},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, []any{map[string]any{"name": "https", "port": int64(443)}}, nested(t, obj, "spec", "ports"))
			assert.Equal(t, map[string]any{"b": map[string]any{"c": int64(2)}}, nested(t, obj, "spec", "config"))
		},
	}, {
		name: "a preserve-unknown-fields subtree keeps unknown fields and owns them one by one",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "bob", patch: widgetHead + "spec: {config: {b: {d: [p, q]}, e: text}}\n"},
			{manager: "bob", patch: widgetHead + "spec: {config: {b: {c: 3}}}\n", wantCode: 409,
				wantCauses: []metav1.StatusCause{conflict(".spec.config.b.c", `"alice"`)}},
			{manager: "alice", patch: widgetHead + "spec: {replicas: 2}\n"},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, map[string]any{"b": map[string]any{"d": []any{"p", "q"}}, "e": "text"}, nested(t, obj, "spec", "config"))
			assert.JSONEq(t, `{"f:spec":{"f:config":{"f:b":{".":{},"f:d":{}},"f:e":{}}}}`, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a status update is recorded with subresource status and owns only status",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "widget-controller", sub: "status", write: func(obj runtime.Object) {
				setField(int64(1), "status", "ready")(obj)
				setField(int64(9), "spec", "replicas")(obj)
			}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, []string{"alice/Apply/example.com/v1/", "widget-controller/Update/example.com/v1/status"}, managers(t, obj))
			assert.JSONEq(t, `{"f:status":{".":{},"f:ready":{}}}`, owned(t, obj, "widget-controller", metav1.ManagedFieldsOperationUpdate, "status"))
		},
	}, {
		name:  "a main-resource apply owns no status",
		steps: []step{{manager: "alice", patch: aliceWidget + "status: {ready: 1}\n"}},
		check: func(t *testing.T, obj runtime.Object) {
			assert.JSONEq(t, aliceWidgetFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a field outside the schema is the server's 500",
		steps: []step{
			{manager: "alice", patch: aliceWidget},
			{manager: "alice", patch: widgetHead + "spec: {bogus: 1}\n", wantCode: 500},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Nil(t, nested(t, obj, "spec", "bogus"))
		},
	}}
	m := widgets(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, play(t, m, newWidget, tt.steps))
		})
	}
}

func TestCustomResourceVersionMismatch(t *testing.T) {
	m := widgets(t)
	_, err := m.Apply(context.Background(), nil, []byte(strings.Replace(aliceWidget, "example.com/v1", "example.com/v2", 1)), "alice", "", false)
	requireStatus(t, err, 400, nil)
	assert.Contains(t, err.Error(), "invalid object type: example.com/v2, Kind=Widget")
}

func TestForCRD(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(crd *apiextensionsv1.CustomResourceDefinition)
		version string
		wantErr string
	}{{
		name:    "served version",
		version: "v1",
	}, {
		name:    "unknown version",
		version: "v2",
		wantErr: `has no version "v2"`,
	}, {
		name:    "no schema",
		edit:    func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Schema = nil },
		version: "v1",
		wantErr: "no schema",
	}, {
		name: "a schema that is not structural",
		edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{}
		},
		version: "v1",
		wantErr: "not structural",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := widgetCRDObject(t)
			if tt.edit != nil {
				tt.edit(crd)
			}
			m, err := ForCRD(crd, tt.version)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "Widget", m.GroupVersionKind().Kind)
		})
	}
}
