package fake

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-lab/converge/sim/internal/semantic"
)

// The store works on typed objects (built-in kinds) and unstructured ones
// (custom resources) through these few helpers, by struct field or by map
// key, never by converting one into the other: a conversion costs more
// than the rest of a write.

// shallowCopy copies the top level of obj: the store changes only
// top-level fields of what it copies (metadata scalars, status), and
// stored objects are never changed in place, so sharing the rest is safe.
func shallowCopy(obj runtime.Object) runtime.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c := &unstructured.Unstructured{Object: make(map[string]any, len(u.Object))}
		for k, v := range u.Object {
			c.Object[k] = v
		}
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			cmd := make(map[string]any, len(md))
			for k, v := range md {
				cmd[k] = v
			}
			c.Object["metadata"] = cmd
		}
		return c
	}
	v := reflect.ValueOf(obj).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(runtime.Object)
}

// setStatus gives dst the status of src.
func setStatus(dst, src runtime.Object) {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su := src.(*unstructured.Unstructured)
		if st, ok := su.Object["status"]; ok {
			du.Object["status"] = st
		} else {
			delete(du.Object, "status")
		}
		return
	}
	f := reflect.ValueOf(dst).Elem().FieldByName("Status")
	if f.IsValid() {
		f.Set(reflect.ValueOf(src).Elem().FieldByName("Status"))
	}
}

// hasStatusField: the Go type has a Status field.
func hasStatusField(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	_, ok := t.FieldByName("Status")
	return ok
}

// skipped are the top-level parts a spec comparison leaves out.
var skipped = map[string]bool{"TypeMeta": true, "ObjectMeta": true, "Status": true, "apiVersion": true, "kind": true, "metadata": true, "status": true}

// sameSpec: nothing but metadata and status differs, which is when the
// generation stays.
func sameSpec(a, b runtime.Object) bool {
	if au, ok := a.(*unstructured.Unstructured); ok {
		bu := b.(*unstructured.Unstructured)
		for k, v := range au.Object {
			if !skipped[k] && !semantic.Equal(v, bu.Object[k]) {
				return false
			}
		}
		for k := range bu.Object {
			if _, ok := au.Object[k]; !ok && !skipped[k] {
				return false
			}
		}
		return true
	}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := av.Type()
	for i := range t.NumField() {
		if skipped[t.Field(i).Name] {
			continue
		}
		if !semantic.Equal(av.Field(i).Addr().Interface(), bv.Field(i).Addr().Interface()) {
			return false
		}
	}
	return true
}

// sameObject: a and b are equal in everything a client could read,
// type metadata aside.
func sameObject(a, b runtime.Object) bool {
	if au, ok := a.(*unstructured.Unstructured); ok {
		return semantic.Equal(au.Object, b.(*unstructured.Unstructured).Object)
	}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := av.Type()
	for i := range t.NumField() {
		if t.Field(i).Name == "TypeMeta" {
			continue
		}
		if !semantic.Equal(av.Field(i).Addr().Interface(), bv.Field(i).Addr().Interface()) {
			return false
		}
	}
	return true
}
