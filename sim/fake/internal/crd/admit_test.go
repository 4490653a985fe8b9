package crd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// blocked is the error the server adds instead of running CEL rules on an
// object that fails its schema's basic checks.
const blocked = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// widget is a Widget with the given spec, written as YAML flow.
func widget(t testing.TB, spec string) *unstructured.Unstructured {
	t.Helper()
	return object(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: "+spec)
}

func TestAdmitDefaults(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	strategyDefault := map[string]any{"type": "Rolling", "rolling": map[string]any{"maxSurge": int64(25)}}
	tests := []struct {
		name string
		spec string
		want map[string]any
	}{
		{
			name: "missing fields and nested objects get their defaults",
			spec: "{image: nginx}",
			want: map[string]any{"image": "nginx", "replicas": int64(1), "mode": "Slow", "strategy": strategyDefault},
		},
		{
			name: "set fields are kept and defaults fill in below them",
			spec: "{image: nginx, replicas: 3, mode: Fast, strategy: {type: Recreate}}",
			want: map[string]any{
				"image": "nginx", "replicas": int64(3), "mode": "Fast",
				"strategy": map[string]any{"type": "Recreate", "rolling": map[string]any{"maxSurge": int64(25)}},
			},
		},
		{
			name: "defaults inside each object of an array",
			spec: "{image: nginx, ports: [{name: http}, {name: https, port: 443}]}",
			want: map[string]any{
				"image": "nginx", "replicas": int64(1), "mode": "Slow", "strategy": strategyDefault,
				"ports": []any{
					map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"},
					map[string]any{"name": "https", "port": int64(443), "protocol": "TCP"},
				},
			},
		},
		{
			name: "null takes the default, or is dropped when there is none",
			spec: "{image: nginx, replicas: null, name: null}",
			want: map[string]any{"image": "nginx", "replicas": int64(1), "mode": "Slow", "strategy": strategyDefault},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := widget(t, tt.spec)
			require.Empty(t, messages(k.Admit(context.Background(), "v1", obj, nil)))
			assert.Equal(t, tt.want, obj.Object["spec"])
		})
	}
}

func TestAdmitPrunes(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	obj := object(t, `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: default
  labels: {app: demo}
  color: blue
extra: 1
spec:
  image: nginx
  bogus: 1
  ports: [{name: http, bogus: 2}]
  template:
    anything: {goes: [1, {deep: true}]}
`)
	require.Empty(t, messages(k.Admit(context.Background(), "v1", obj, nil)))

	assert.Equal(t, map[string]any{"name": "w", "namespace": "default", "labels": map[string]any{"app": "demo"}}, obj.Object["metadata"])
	assert.NotContains(t, obj.Object, "extra")
	spec := obj.Object["spec"].(map[string]any)
	assert.NotContains(t, spec, "bogus")
	assert.Equal(t, []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}}, spec["ports"])
	assert.Equal(t, map[string]any{"anything": map[string]any{"goes": []any{int64(1), map[string]any{"deep": true}}}}, spec["template"],
		"x-kubernetes-preserve-unknown-fields keeps the subtree")
}

func TestCoerce(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	// As stored before the CRD gained its defaults, with an unknown field
	// and a malformed label value.
	stored := object(t, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default, uid: abc, labels: {app: 5}, color: blue}
spec: {image: nginx, bogus: 1, ports: [{name: http, bogus: 2}]}
`)
	unknown, err := k.Coerce(stored)
	require.NoError(t, err)
	assert.Equal(t, []string{"metadata.color", "spec.bogus", "spec.ports[0].bogus"}, unknown)
	assert.Equal(t, map[string]any{"name": "w", "namespace": "default", "uid": "abc"}, stored.Object["metadata"],
		"malformed metadata is dropped when read from storage")
	assert.Equal(t, int64(1), stored.Object["spec"].(map[string]any)["replicas"])

	again, err := k.Coerce(stored)
	require.NoError(t, err)
	assert.Empty(t, again)

	_, err = k.Coerce(object(t, "apiVersion: example.com/v7\nkind: Widget"))
	assert.ErrorContains(t, err, `apiVersion "example.com/v7" is not a version of widgets.example.com`)
}

func TestAdmitMalformedMetadata(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	obj := object(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, labels: {app: 5}}\nspec: {image: nginx}")
	errs := k.Admit(context.Background(), "v1", obj, nil)
	require.Len(t, errs, 1)
	assert.Equal(t, "metadata", errs[0].Field)
	assert.Contains(t, errs[0].Detail, "cannot unmarshal number into Go struct field ObjectMeta.labels of type string")
}

func TestAdmitErrors(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	tests := []struct {
		name   string
		spec   string
		status string
		want   []string
	}{
		{
			name: "required field missing",
			spec: "{}",
			want: []string{"spec.image: Required value", blocked},
		},
		{
			name: "type mismatch",
			spec: "{image: nginx, replicas: three}",
			want: []string{
				`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
				`.spec.replicas: Invalid value: 0: .spec.replicas accessor error: three is of the type string, expected int64`,
				blocked,
			},
		},
		{
			name: "maximum",
			spec: "{image: nginx, replicas: 11, mode: Fast}",
			want: []string{"spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"},
		},
		{
			name: "minimum, also checked as the scale subresource's replicas",
			spec: "{image: nginx, replicas: -1}",
			want: []string{
				"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
				".spec.replicas: Invalid value: -1: should be a non-negative integer",
			},
		},
		{
			name: "enum",
			spec: "{image: nginx, mode: Medium}",
			want: []string{`spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow"`, blocked},
		},
		{
			name: "pattern",
			spec: "{image: nginx, name: ABC}",
			want: []string{`spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'`},
		},
		{
			name: "maxLength",
			spec: "{image: nginxnginxnginxnginxnginx}",
			want: []string{"spec.image: Too long: may not be more than 20 bytes", blocked},
		},
		{
			name: "maxItems",
			spec: "{image: nginx, ports: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}]}",
			want: []string{"spec.ports: Too many: 5: must have at most 4 items", blocked},
		},
		{
			name: "required field inside an array",
			spec: "{image: nginx, ports: [{port: 1}]}",
			want: []string{"spec.ports[0].name: Required value", blocked},
		},
		{
			name: "duplicate key in a list map",
			spec: "{image: nginx, ports: [{name: a}, {name: a, port: 1}]}",
			want: []string{`spec.ports[1]: Duplicate value: {"name":"a"}`},
		},
		{
			name: "duplicate in a list set",
			spec: "{image: nginx, tags: [a, a]}",
			want: []string{`spec.tags[1]: Duplicate value: "a"`},
		},
		{
			name: "CEL rule with a message",
			spec: "{image: nginx, replicas: 6}",
			want: []string{"spec: Invalid value: more than 5 replicas need mode Fast"},
		},
		{
			name: "CEL rule with a messageExpression",
			spec: "{image: nginx, limits: {min: 3, max: 1, unit: cm}}",
			want: []string{"spec.limits: Invalid value: min exceeds max (in cm)"},
		},
		{
			name: "several CEL rules fail together",
			spec: "{image: nginx, replicas: 6, limits: {min: 3, max: 1, unit: cm}}",
			want: []string{
				"spec: Invalid value: more than 5 replicas need mode Fast",
				"spec.limits: Invalid value: min exceeds max (in cm)",
			},
		},
		{
			name:   "status replicas and selector read by the scale subresource",
			spec:   "{image: nginx}",
			status: "{replicas: -1, selector: 5}",
			want: []string{
				`status.selector: Invalid value: "integer": status.selector in body must be of type string: "integer"`,
				".status.replicas: Invalid value: -1: should be a non-negative integer",
				`.status.selector: Invalid value: "": .status.selector accessor error: 5 is of the type int64, expected string`,
				blocked,
			},
		},
		{
			name:   "valid",
			spec:   "{image: nginx, replicas: 6, mode: Fast, limits: {min: 1, max: 3, unit: cm}, ports: [{name: a}, {name: b}], tags: [red, blue]}",
			status: "{replicas: 2, selector: 'app=demo'}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := widget(t, tt.spec)
			if tt.status != "" {
				obj.Object["status"] = value(t, tt.status)
			}
			assert.Equal(t, tt.want, messages(k.Admit(context.Background(), "v1", obj, nil)))
		})
	}
}

func TestAdmitTypeMeta(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	tests := []struct {
		name    string
		version string
		doc     string
		want    []string
	}{
		{
			name:    "wrong kind",
			version: "v1",
			doc:     "apiVersion: example.com/v1\nkind: Gizmo\nspec: {}",
			want:    []string{`kind: Invalid value: "Gizmo": must be Widget`},
		},
		{
			name:    "apiVersion of another version",
			version: "v1",
			doc:     "apiVersion: example.com/v2\nkind: Widget\nspec: {}",
			want:    []string{`apiVersion: Invalid value: "example.com/v2": must be example.com/v1`},
		},
		{
			name:    "version not served",
			version: "v2",
			doc:     "apiVersion: example.com/v2\nkind: Widget\nspec: {}",
			want:    []string{`apiVersion: Unsupported value: "example.com/v2": supported values: "example.com/v1"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, tt.doc)
			before := obj.DeepCopy()
			assert.Equal(t, tt.want, messages(k.Admit(context.Background(), tt.version, obj, nil)))
			assert.Equal(t, before, obj, "nothing is pruned or defaulted")
		})
	}
}

func TestAdmitFillsTypeMeta(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	obj := object(t, "metadata: {name: w}\nspec: {image: nginx}")
	require.Empty(t, messages(k.Admit(context.Background(), "v1", obj, nil)))
	assert.Equal(t, "example.com/v1", obj.GetAPIVersion())
	assert.Equal(t, "Widget", obj.GetKind())
	assert.Equal(t, int64(1), obj.Object["spec"].(map[string]any)["replicas"])
}

func TestAdmitUpdate(t *testing.T) {
	k := newKind(t, "widgets.yaml")
	tests := []struct {
		name string
		old  string
		spec string
		want []string
	}{
		{
			name: "transition rule holds",
			old:  "{image: nginx, id: a}",
			spec: "{image: httpd, id: a}",
		},
		{
			name: "transition rule breaks",
			old:  "{image: nginx, id: a}",
			spec: "{image: nginx, id: b}",
			want: []string{`spec.id: Invalid value: "b": id is immutable`},
		},
		{
			name: "transition rule is skipped without an old value",
			old:  "{image: nginx}",
			spec: "{image: nginx, id: b}",
		},
		{
			name: "an unchanged invalid value is ratcheted",
			old:  "{image: nginx, replicas: 11, mode: Fast}",
			spec: "{image: httpd, replicas: 11, mode: Fast}",
		},
		{
			name: "a changed invalid value is not",
			old:  "{image: nginx, replicas: 11, mode: Fast}",
			spec: "{image: nginx, replicas: 12, mode: Fast}",
			want: []string{"spec.replicas: Invalid value: 12: spec.replicas in body should be less than or equal to 10"},
		},
		{
			name: "a CEL rule on an unchanged object is ratcheted",
			old:  "{image: nginx, replicas: 6, limits: {min: 3, max: 1, unit: cm}}",
			spec: "{image: nginx, replicas: 6, limits: {min: 3, max: 1, unit: cm}}",
		},
		{
			name: "a CEL rule on a changed object is not",
			old:  "{image: nginx, limits: {min: 3, max: 1, unit: cm}}",
			spec: "{image: nginx, limits: {min: 4, max: 1, unit: cm}}",
			want: []string{"spec.limits: Invalid value: min exceeds max (in cm)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			old := widget(t, tt.old)
			before := old.DeepCopy()
			assert.Equal(t, tt.want, messages(k.Admit(context.Background(), "v1", widget(t, tt.spec), old)))
			assert.Equal(t, before, old, "old is not modified")
		})
	}
}

func TestMultiVersion(t *testing.T) {
	k := newKind(t, "gadgets.yaml")
	gadget := func(version, spec string) *unstructured.Unstructured {
		return object(t, "apiVersion: example.com/"+version+"\nkind: Gadget\nmetadata: {name: g}\nspec: "+spec)
	}

	t.Run("each version has its own schema", func(t *testing.T) {
		beta := gadget("v1beta1", "{size: 3, legacy: x}")
		assert.Equal(t, []string{"spec.size: Invalid value: 3: size must be even"}, messages(k.Admit(context.Background(), "v1beta1", beta, nil)))
		assert.Equal(t, map[string]any{"size": int64(3), "legacy": "x"}, beta.Object["spec"])

		v1 := gadget("v1", "{size: 3, legacy: x}")
		assert.Empty(t, messages(k.Admit(context.Background(), "v1", v1, nil)))
		assert.Equal(t, map[string]any{"size": int64(3)}, v1.Object["spec"], "legacy is not in v1")

		defaulted := gadget("v1", "{}")
		require.Empty(t, messages(k.Admit(context.Background(), "v1", defaulted, nil)))
		assert.Equal(t, map[string]any{"size": int64(2)}, defaulted.Object["spec"])
	})

	t.Run("a version that is neither served nor stored", func(t *testing.T) {
		assert.Equal(t, []string{`apiVersion: Unsupported value: "example.com/v0": supported values: "example.com/v1beta1", "example.com/v1"`},
			messages(k.Admit(context.Background(), "v0", gadget("v0", "{}"), nil)))
		assert.ErrorContains(t, k.Convert(gadget("v1", "{}"), "v0"), "gadgets.example.com has no version v0")
	})

	t.Run("conversion changes apiVersion and prunes", func(t *testing.T) {
		obj := gadget("v1beta1", "{legacy: x}")
		require.NoError(t, k.Convert(obj, "v1"))
		assert.Equal(t, "example.com/v1", obj.GetAPIVersion())
		assert.Equal(t, "Gadget", obj.GetKind())
		assert.Equal(t, map[string]any{}, obj.Object["spec"], "pruned, and not defaulted")
	})

	t.Run("conversion refuses another group", func(t *testing.T) {
		obj := object(t, "apiVersion: other.io/v1\nkind: Gadget")
		assert.ErrorContains(t, k.Convert(obj, "v1"), `cannot convert apiVersion "other.io/v1" to group "example.com"`)
	})

	t.Run("an update compares with old in the request's version", func(t *testing.T) {
		// Stored in v1, where odd sizes are fine; v1beta1 ratchets an
		// unchanged odd size and refuses a new one.
		old := gadget("v1", "{size: 3}")
		assert.Empty(t, messages(k.Admit(context.Background(), "v1beta1", gadget("v1beta1", "{size: 3, legacy: x}"), old)))
		assert.Equal(t, []string{"spec.size: Invalid value: 5: size must be even"},
			messages(k.Admit(context.Background(), "v1beta1", gadget("v1beta1", "{size: 5}"), old)))
		assert.Equal(t, "example.com/v1", old.GetAPIVersion())

		// oldSelf holds only what v1beta1 knows of the stored object.
		stored := gadget("v1", "{settings: {a: x, b: y}}")
		assert.Empty(t, messages(k.Admit(context.Background(), "v1beta1", gadget("v1beta1", "{settings: {a: x}}"), stored)))
		assert.Equal(t, []string{"spec.settings: Invalid value: settings are immutable"},
			messages(k.Admit(context.Background(), "v1beta1", gadget("v1beta1", "{settings: {a: z}}"), stored)))
	})
}

// BenchmarkAdmit admits a small CR with two CEL rules, as a create and as an
// update that also evaluates a transition rule.
func BenchmarkAdmit(b *testing.B) {
	k := newKind(b, "widgets.yaml")
	ctx := context.Background()
	const spec = "{image: nginx, replicas: 3, id: a, ports: [{name: http}], limits: {min: 1, max: 2, unit: cm}}"
	create := widget(b, spec)
	old := widget(b, spec)
	require.Empty(b, k.Admit(ctx, "v1", old, nil))

	b.Run("create", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs := k.Admit(ctx, "v1", create.DeepCopy(), nil); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs := k.Admit(ctx, "v1", create.DeepCopy(), old); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}

// BenchmarkNew measures building a Kind, which compiles every CEL rule.
func BenchmarkNew(b *testing.B) {
	crd := loadCRD(b, "widgets.yaml")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(crd); err != nil {
			b.Fatal(err)
		}
	}
}
