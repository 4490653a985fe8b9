package expect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var (
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widgetGVK     = schema.GroupVersionKind{Group: "example.converge.dev", Version: "v1", Kind: "Widget"}
)

// widgetCRD has a typed spec, a map, a part that keeps unknown fields, an
// int-or-string and an embedded object.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.converge.dev}
spec:
  group: example.converge.dev
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                replicas: {type: integer}
                config: {type: object, additionalProperties: {type: string}}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
                open:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    known: {type: object, properties: {a: {type: string}}}
                port: {x-kubernetes-int-or-string: true}
                ports:
                  type: array
                  items: {type: object, properties: {port: {type: integer}, name: {type: string}}}
                template:
                  type: object
                  x-kubernetes-embedded-resource: true
                  x-kubernetes-preserve-unknown-fields: true
                pod:
                  type: object
                  x-kubernetes-embedded-resource: true
                  properties:
                    spec: {type: object, properties: {nodeName: {type: string}}}
            status:
              type: object
              properties:
                ready: {type: integer}
                observedGeneration: {type: integer}
                conditions:
                  type: array
                  items: {type: object, properties: {type: {type: string}, status: {type: string}}}
`

func widgetSchema(t *testing.T) *Schema {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict([]byte(widgetCRD), &crd))
	s := CRDSchemas(&crd)[widgetGVK]
	require.NotNil(t, s, "the CRD's schema is structural")
	return s
}

func checkFields(t *testing.T, src string, types Types) []*FieldError {
	t.Helper()
	var e *Expression
	var err error
	switch {
	case acrossRule(src):
		e, err = CompileAcross(src)
	default:
		e, err = Compile(src, oldObjectRule(src))
	}
	require.NoError(t, err, src)
	return e.CheckFields(types)
}

func acrossRule(src string) bool    { return containsWord(src, "objects") }
func oldObjectRule(src string) bool { return containsWord(src, "oldObject") }

func containsWord(src, w string) bool {
	for i := 0; i+len(w) <= len(src); i++ {
		if src[i:i+len(w)] == w && (i == 0 || !isWordByte(src[i-1])) && (i+len(w) == len(src) || !isWordByte(src[i+len(w)])) {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func TestCheckFieldsOfABuiltinKind(t *testing.T) {
	types := Types{Object: BuiltinSchema(deploymentGVK)}
	require.NotNil(t, types.Object)
	for src, want := range map[string]string{
		// Accepted: fields a Deployment has, set or not.
		"object.spec.replicas > 0":                                                  "",
		"has(object.spec.paused) && object.spec.paused":                             "",
		"object.status.readyReplicas == object.spec.replicas":                       "",
		"object.metadata.labels.app == 'web'":                                       "", // a map: any key
		"object.metadata.annotations['converge.dev/x'] == '1'":                      "",
		"object.apiVersion == 'apps/v1' && object.kind == 'Deployment'":             "",
		"object.spec.template.spec.containers.all(c, c.image != '')":                "",
		"object.spec.template.spec.containers[0].resources.limits.cpu == '1'":       "",
		"object.spec.strategy.rollingUpdate.maxSurge == '25%'":                      "", // int-or-string
		"object.metadata.ownerReferences.exists(r, r.controller == true)":           "",
		"object.status.conditions.exists_one(c, c.type == 'Available')":             "",
		"object.spec.template.spec.containers.map(c, c.name).all(n, n != '')":       "", // map's result: unknown
		"object.metadata.creationTimestamp != ''":                                   "", // metav1.Time
		"object.spec.template.spec.containers.all(i, c, c.image != '')":             "",
		"oldObject.spec.replicas <= object.spec.replicas":                           "",
		"object.?spec.?replicas.orValue(0) > 0":                                     "",
		"'replicas' in object.spec":                                                 "",
		"object.metadata.managedFields.all(f, f.manager != '')":                     "",
		"object.spec.template.spec.containers.filter(c, c.name == 'a').size() == 1": "",
		// Refused: fields no Deployment can hold.
		"object.spec.replica > 0":                                      `reads object.spec.replica, which Deployment (apps/v1) has no field "replica" (did you mean "replicas"?)`,
		"has(object.spec.replica)":                                     `reads object.spec.replica, which Deployment (apps/v1) has no field "replica"`,
		"object.metadata.lables.app == 'web'":                          `has no field "lables" (did you mean "labels"?)`,
		"object.spec.template.spec.containers.all(c, c.imag != '')":    `reads c.imag, which Deployment (apps/v1) has no field "imag" (did you mean "image"?)`,
		"object.spec.template.spec.containers.all(i, c, c.imag != '')": `reads c.imag`,
		"object.spec.template.spec.containers[0].imag == ''":           `reads object.spec.template.spec.containers[0].imag`,
		"object.spec['replica'] == 1":                                  `reads object.spec["replica"], which Deployment (apps/v1) has no field "replica"`,
		"object.?spec.?replica.orValue(0) > 0":                         `reads object.?spec.?replica`,
		"'replica' in object.spec":                                     `has no field "replica"`,
		"oldObject.spec.replica <= object.spec.replicas":               `reads oldObject.spec.replica`,
		"object.spec.replicas.value > 0":                               `reads object.spec.replicas.value, but Deployment (apps/v1) spec.replicas is an integer, which has no fields`,
		"object.spec.template.spec.containers.image == 'x'":            `reads object.spec.template.spec.containers.image, but Deployment (apps/v1) spec.template.spec.containers is a list`,
		"object.status.conditions.exists(c, c.type == 'Available' && c.reason.startsWith('x') && c.sttus == 'True')": `reads c.sttus`,
	} {
		errs := checkFields(t, src, types)
		if want == "" {
			assert.Empty(t, errs, src)
			continue
		}
		require.Len(t, errs, 1, src)
		assert.Contains(t, errs[0].Error(), want, src)
	}
}

// A ConfigMap's data is a map: any key may be there, so a typo in a key
// cannot be told from a key not written yet.
func TestCheckFieldsAcceptsAnyKeyOfAMap(t *testing.T) {
	types := Types{Object: BuiltinSchema(configMapGVK)}
	assert.Empty(t, checkFields(t, "object.data.mising == 'x'", types))
	assert.Empty(t, checkFields(t, "has(object.binaryData.x)", types))
	errs := checkFields(t, "object.dta.mising == 'x'", types)
	require.Len(t, errs, 1)
	assert.Equal(t, `reads object.dta, which ConfigMap (v1) has no field "dta" (did you mean "data"?)`, errs[0].Error())
}

func TestCheckFieldsOfACustomResource(t *testing.T) {
	types := Types{Object: widgetSchema(t)}
	for src, want := range map[string]string{
		"object.spec.replicas == object.status.ready":                                   "",
		"object.status.observedGeneration == object.metadata.generation":                "",
		"object.metadata.finalizers.exists(f, f == 'x')":                                "",
		"object.spec.config.anything == 'x'":                                            "", // additionalProperties
		"object.spec.extra.any.depth.at.all == 1":                                       "", // preserve-unknown-fields
		"object.spec.open.other.x == 1 && object.spec.open.known.a == 'b'":              "", // preserve beside properties
		"object.spec.port == 80 || object.spec.port == 'http'":                          "", // int-or-string
		"object.spec.ports.all(p, p.port > 0 && p.name != '')":                          "",
		"object.spec.template.metadata.name == 'a' && object.spec.template.spec.x == 1": "",
		"object.spec.pod.metadata.labels.a == 'b' && object.spec.pod.kind == 'Pod'":     "", // embedded resource
		"object.spec.pod.spec.nodeName != ''":                                           "",
		"object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')":   "",
		"object.spec.replica == 1":                                                      `reads object.spec.replica, which Widget (example.converge.dev/v1) has no field "replica" (did you mean "replicas"?)`,
		"has(object.status.redy)":                                                       `has no field "redy" (did you mean "ready"?)`,
		"object.spec.open.known.b == 'x'":                                               `reads object.spec.open.known.b`, // properties of its own: pruned again
		"object.spec.ports.all(p, p.prot > 0)":                                          `reads p.prot, which Widget (example.converge.dev/v1) has no field "prot" (did you mean "port"?)`,
		"object.spec.pod.spec.node == 'a'":                                              `has no field "node"`,
		"object.status.conditions.exists(c, c.reason == 'x')":                           `reads c.reason`,
		"object.metadata.generaton > 0":                                                 `has no field "generaton" (did you mean "generation"?)`,
		"object.specs.replicas > 0":                                                     `has no field "specs" (did you mean "spec"?)`,
	} {
		errs := checkFields(t, src, types)
		if want == "" {
			assert.Empty(t, errs, src)
			continue
		}
		require.Len(t, errs, 1, src)
		assert.Contains(t, errs[0].Error(), want, src)
	}
}

func TestCheckFieldsAcrossKinds(t *testing.T) {
	types := Types{Object: widgetSchema(t), Kinds: map[string]*Schema{
		"Widget":     widgetSchema(t),
		"Deployment": BuiltinSchema(deploymentGVK),
	}}
	for src, want := range map[string]string{
		"objects.Deployment.all(d, d.metadata.name != object.metadata.name || d.status.observedGeneration == d.metadata.generation)": "",
		"objects['Deployment'].exists(d, d.spec.replicas == object.spec.replicas)":                                                   "",
		"objects.Deployment.size() == 0 || objects.Deployment[0].spec.replicas > 0":                                                  "",
		"objects.Unknown.all(u, u.whatever.x == 1)":                                                                                  "", // no schema: not checked
		"objects.Widget.all(w, w.spec.replicas >= 0)":                                                                                "",
		"objects.Deployment.all(d, d.spec.replica > 0)":                                                                              `reads d.spec.replica, which Deployment (apps/v1) has no field "replica" (did you mean "replicas"?)`,
		"objects['Deployment'].exists(d, d.statsu.x == 1)":                                                                           `reads d.statsu, which Deployment (apps/v1) has no field "statsu" (did you mean "status"?)`,
		"objects.Deployment[0].spec.replica > 0":                                                                                     `reads objects.Deployment[0].spec.replica`,
		"objects.Deployment.all(object, object.spec.replica > 0)":                                                                    `which Deployment (apps/v1) has no field "replica"`, // shadowed
		"objects.Widget.all(w, w.spec.replica > 0) && object.spec.replicas > 0":                                                      `which Widget (example.converge.dev/v1) has no field "replica"`,
	} {
		errs := checkFields(t, src, types)
		if want == "" {
			assert.Empty(t, errs, src)
			continue
		}
		require.Len(t, errs, 1, src)
		assert.Contains(t, errs[0].Error(), want, src)
	}
}

func TestCheckFieldsWithoutASchemaChecksNothing(t *testing.T) {
	assert.Empty(t, checkFields(t, "object.spec.replica > 0", Types{}))
	assert.Nil(t, BuiltinSchema(schema.GroupVersionKind{Group: "example.converge.dev", Version: "v1", Kind: "Widget"}))
	assert.Nil(t, BuiltinSchema(schema.GroupVersionKind{Group: "apps", Version: "v1beta9", Kind: "Deployment"}))
}

func TestCheckFieldsPlacesTheField(t *testing.T) {
	types := Types{Object: BuiltinSchema(deploymentGVK)}
	errs := checkFields(t, "object.spec.replicas > 0 &&\n  object.spec.replica < 10", types)
	require.Len(t, errs, 1)
	assert.Equal(t, 2, errs[0].Line)
	assert.Equal(t, 15, errs[0].Column, "the column of replica")
	errs = checkFields(t, "has(object.spec.replica)", types)
	require.Len(t, errs, 1)
	assert.Equal(t, 1, errs[0].Line)
	assert.Equal(t, 17, errs[0].Column)
	errs = checkFields(t, "object.spec['replica'] == 1", types)
	require.Len(t, errs, 1)
	assert.Equal(t, 14, errs[0].Column, "the key")
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"replica", "replicas", 1}, {"sttus", "status", 1}, {"kitten", "sitting", 3}, {"prot", "port", 1}, {"abc", "", 3}} {
		assert.Equal(t, c.want, distance(c.a, c.b), "%s %s", c.a, c.b)
	}
	assert.Equal(t, "replicas", closest("replica", []string{"paused", "replicas", "selector"}))
	assert.Empty(t, closest("x", []string{"y", "replicas"}), "one letter is too short to guess from")
}

func TestCheckValueOfAPartialObject(t *testing.T) {
	deployment := BuiltinSchema(deploymentGVK)
	widget := widgetSchema(t)
	path := func(s string) Path {
		if s == "" {
			return nil
		}
		p, err := ParsePath(s)
		require.NoError(t, err)
		return p
	}
	for _, c := range []struct {
		s     *Schema
		path  string
		value any
		want  string
	}{
		{deployment, "", map[string]any{"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a/b": "c"}}}}}, ""},
		{deployment, "", map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}}, ""},
		{deployment, "spec.replicas", int64(3), ""},
		{deployment, `metadata.labels["app"]`, "web", ""},
		{deployment, "spec.template.spec.containers[0].image", "x", ""},
		{deployment, "spec.template", map[string]any{"spec": map[string]any{"nodeName": "n"}}, ""},
		{deployment, "spec", "not an object", ""}, // a value of another shape: the API server answers for it
		{widget, "spec.config.any", "x", ""},
		{widget, "", map[string]any{"spec": map[string]any{"extra": map[string]any{"a": map[string]any{"b": 1}}}}, ""},
		{nil, "spec.anything", "x", ""},
		{deployment, "", map[string]any{"status": map[string]any{"readyReplica": int64(2)}}, `Deployment (apps/v1) has no field status.readyReplica (did you mean "readyReplicas"?)`},
		{deployment, "", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"imag": "x"}}}}}}, `Deployment (apps/v1) has no field spec.template.spec.containers[].imag (did you mean "image"?)`},
		{deployment, "spec.replica", int64(3), `Deployment (apps/v1) has no field spec.replica (did you mean "replicas"?)`},
		{deployment, "spec", map[string]any{"replica": nil}, `Deployment (apps/v1) has no field spec.replica (did you mean "replicas"?)`},
		{deployment, "spec.replicas.value", int64(3), `Deployment (apps/v1) spec.replicas is an integer, which has no fields`},
		{widget, "spec.replica", int64(3), `Widget (example.converge.dev/v1) has no field spec.replica (did you mean "replicas"?)`},
	} {
		errs := c.s.CheckValue(path(c.path), c.value)
		if c.want == "" {
			assert.Empty(t, errs, "%s %v", c.path, c.value)
			continue
		}
		require.Len(t, errs, 1, "%s %v", c.path, c.value)
		assert.Equal(t, c.want, errs[0].Error())
	}
}

// A schema that is not structural (a field declared only under allOf) is
// not trusted: its fields could be refused wrongly.
func TestCheckFieldsTrustsOnlyStructuralSchemas(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.converge.dev}
spec:
  group: example.converge.dev
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              allOf: [{properties: {replicas: {type: integer}}}]
`), &crd))
	assert.Empty(t, CRDSchemas(&crd))
}

// A value with a JSON encoding of its own may hold anything: a
// ControllerRevision's data (RawExtension) is any object.
func TestCheckFieldsAcceptsAnythingBelowARawValue(t *testing.T) {
	types := Types{Object: BuiltinSchema(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ControllerRevision"})}
	require.NotNil(t, types.Object)
	assert.Empty(t, checkFields(t, "object.data.spec.template.metadata.name != '' && object.revision > 0", types))
	require.Len(t, checkFields(t, "object.revison > 0", types), 1)
}
