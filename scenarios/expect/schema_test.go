package expect

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/scheme"
)

// Every field the JSON of a built-in object can hold is accepted: each
// kind client-go knows, every field set (to depth 8), is checked against
// its own schema.
func TestBuiltinSchemasHoldEveryFieldTheirObjectsWrite(t *testing.T) {
	kinds := 0
	for gvk, typ := range scheme.Scheme.AllKnownTypes() {
		s := BuiltinSchema(gvk)
		if s == nil {
			continue
		}
		kinds++
		v := reflect.New(typ)
		fill(v.Elem(), 8)
		data, err := json.Marshal(v.Interface())
		require.NoError(t, err, gvk)
		var obj map[string]any
		require.NoError(t, json.Unmarshal(data, &obj), gvk)
		for _, fe := range s.CheckValue(nil, obj) {
			t.Errorf("%s: %v", gvk, fe)
		}
	}
	assert.Greater(t, kinds, 100)
	assert.NotNil(t, BuiltinSchema(deploymentGVK))
}

// fill sets every field of v it can reach within depth, leaving values
// with a JSON encoding of their own at zero (their text must parse).
func fill(v reflect.Value, depth int) {
	if depth == 0 || !v.CanSet() {
		return
	}
	t := v.Type()
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if t.Elem().Implements(marshaler) || reflect.PointerTo(t.Elem()).Implements(marshaler) {
			return
		}
		v.Set(reflect.New(t.Elem()))
		fill(v.Elem(), depth-1)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), depth-1)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(t, 1, 1))
		fill(v.Index(0), depth-1)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(t)
		e := reflect.New(t.Elem()).Elem()
		fill(e, depth-1)
		m.SetMapIndex(reflect.ValueOf("k").Convert(t.Key()), e)
		v.Set(m)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
}
