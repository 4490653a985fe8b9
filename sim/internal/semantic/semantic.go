// Package semantic compares API objects as apiequality.Semantic does, fast
// when they are identical.
package semantic

import (
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Equal reports whether *a and *b are semantically equal (a and b are
// pointers to values of one type). Identical values, the usual answer of
// a no-op check, are settled by reflect.DeepEqual through the pointers,
// with no copy and no lookup of an equality function per field: identity
// implies semantic equality. Only values that differ somewhere are
// compared again semantically (a quantity or a time spelled two ways).
func Equal(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	if av.Kind() == reflect.Pointer && bv.Kind() == reflect.Pointer && !av.IsNil() && !bv.IsNil() {
		// On values: Semantic is slower through pointers.
		return apiequality.Semantic.DeepEqual(av.Elem().Interface(), bv.Elem().Interface())
	}
	return apiequality.Semantic.DeepEqual(a, b)
}
