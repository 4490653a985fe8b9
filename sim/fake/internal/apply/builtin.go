package apply

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

// builtinTypes parses client-go's schema of every built-in kind, which takes
// long enough to do once per process and share.
var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

// ForBuiltin returns the manager for a built-in kind: gvk must be in
// client-go's scheme (k8s.io/client-go/kubernetes/scheme). The first call in
// a process parses the schema of all built-in kinds.
func ForBuiltin(gvk schema.GroupVersionKind) (*Manager, error) {
	if !scheme.Scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("%v is not a built-in kind", gvk)
	}
	if _, err := scheme.Scheme.ToOpenAPIDefinitionName(gvk); err != nil {
		return nil, fmt.Errorf("%v has no schema: %w", gvk, err)
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	return newManager(typeInfo{
		gvk:           gvk,
		hasStatus:     hasSpecAndStatus(obj),
		typeConverter: builtinTypes(),
		// The field manager converts in place, as on the server; Manager
		// hands it copies.
		convertor: runtime.UnsafeObjectConvertor(scheme.Scheme),
		defaulter: scheme.Scheme,
		creater:   scheme.Scheme,
	})
}

// hasSpecAndStatus: the built-in kinds with a status subresource are those
// with both a spec and a status, the same rule the fake store uses.
func hasSpecAndStatus(obj runtime.Object) bool {
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	var spec, status bool
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		spec = spec || name == "spec"
		status = status || name == "status"
	}
	return spec && status
}
