package expect

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Schema is what fields a value of an object can hold, enough to tell a
// field that can never be there from one that is merely not there yet.
// The nil *Schema (and Any) stands for a value that may hold anything:
// nothing below it is refused.
type Schema struct {
	kind shape
	// fields of an object; with open, other fields may be there too
	// (x-kubernetes-preserve-unknown-fields beside properties).
	fields map[string]*Schema
	open   bool
	// elem is a list's items or a map's values (nil: anything).
	elem *Schema
	// scalar names a scalar's type: string, integer, number, boolean.
	scalar string
	// name names a kind's root: Deployment (apps/v1).
	name string
}

type shape int

const (
	anything shape = iota
	object
	mapOf
	listOf
	scalarOf
)

// Name is what a kind's schema is called in messages: Deployment
// (apps/v1). Empty for a value below a root.
func (s *Schema) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// field returns the schema of field name of s, and whether it can be
// there at all.
func (s *Schema) field(name string) (*Schema, bool) {
	switch {
	case s == nil || s.kind == anything:
		return nil, true
	case s.kind == mapOf:
		return s.elem, true
	case s.kind == object:
		f, ok := s.fields[name]
		return f, ok || s.open
	}
	return nil, false
}

// fieldNames lists the fields of an object, sorted.
func (s *Schema) fieldNames() []string {
	out := make([]string, 0, len(s.fields))
	for k := range s.fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// StructuralSchema is the schema of a custom resource of version
// gv.WithKind(kind) as its CRD's structural schema gives it: what the API
// server keeps of an object (it prunes the rest), as it does for
// x-kubernetes-validations. metadata is ObjectMeta's, apiVersion and kind
// are strings, whatever the schema says of them.
func StructuralSchema(s *structuralschema.Structural, gvk schema.GroupVersionKind) *Schema {
	root := fromStructural(s, false)
	if root == nil || root.kind != object {
		return nil
	}
	root = withTypeMeta(root)
	root.name = kindName(gvk)
	return root
}

// withTypeMeta returns a copy of s, an object's schema, with apiVersion,
// kind and metadata as every Kubernetes object has them.
func withTypeMeta(s *Schema) *Schema {
	c := *s
	c.fields = make(map[string]*Schema, len(s.fields)+3)
	for k, v := range s.fields {
		c.fields[k] = v
	}
	c.fields["apiVersion"] = &Schema{kind: scalarOf, scalar: "string"}
	c.fields["kind"] = &Schema{kind: scalarOf, scalar: "string"}
	c.fields["metadata"] = GoSchema(reflect.TypeFor[metav1.ObjectMeta]())
	return &c
}

// fromStructural turns a structural schema into a Schema; preserve is
// whether unknown fields are kept where s says nothing (inherited from
// the parent until a level gives properties of its own).
func fromStructural(s *structuralschema.Structural, preserve bool) *Schema {
	if s == nil {
		return nil
	}
	if s.XIntOrString {
		return nil
	}
	props := len(s.Properties) > 0
	additional := s.AdditionalProperties != nil && (s.AdditionalProperties.Bool || s.AdditionalProperties.Structural != nil)
	if s.XPreserveUnknownFields || (preserve && !props && !additional) {
		preserve = true
	} else if props || additional {
		preserve = false
	}
	switch s.Type {
	case "object":
		if additional {
			var elem *Schema
			if s.AdditionalProperties.Structural != nil {
				elem = fromStructural(s.AdditionalProperties.Structural, false)
			}
			return &Schema{kind: mapOf, elem: elem}
		}
		out := &Schema{kind: object, open: preserve, fields: make(map[string]*Schema, len(s.Properties))}
		for k := range s.Properties {
			p := s.Properties[k]
			out.fields[k] = fromStructural(&p, preserve)
		}
		if s.XEmbeddedResource {
			out = withTypeMeta(out)
		}
		return out
	case "array":
		return &Schema{kind: listOf, elem: fromStructural(s.Items, preserve)}
	case "string", "integer", "number", "boolean":
		return &Schema{kind: scalarOf, scalar: s.Type}
	}
	return nil
}

// CRDSchemas returns the schema of each version of crd's kind that has a
// structural schema; a version without one is left out (not checked): a
// field declared only under allOf, anyOf or oneOf is not structural, and
// would be refused wrongly.
func CRDSchemas(crd *apiextensionsv1.CustomResourceDefinition) map[schema.GroupVersionKind]*Schema {
	out := map[schema.GroupVersionKind]*Schema{}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			continue
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil || len(structuralschema.ValidateStructural(nil, s)) > 0 {
			continue // the API server refuses it; its fields cannot be trusted
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		if root := StructuralSchema(s, gvk); root != nil {
			out[gvk] = root
		}
	}
	return out
}

// BuiltinSchema returns the schema of a kind client-go knows (its
// kubernetes scheme), from the Go type's JSON fields, or nil.
func BuiltinSchema(gvk schema.GroupVersionKind) *Schema {
	t, ok := scheme.Scheme.AllKnownTypes()[gvk]
	if !ok || gvk.Version == "__internal" {
		return nil
	}
	root := GoSchema(t)
	if root == nil || root.kind != object {
		return nil
	}
	c := *root
	c.name = kindName(gvk)
	return &c
}

func kindName(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("%s (%s)", gvk.Kind, gvk.GroupVersion())
}

var (
	goSchemas   sync.Mutex
	goSchemaFor = map[reflect.Type]*Schema{}
	marshaler   = reflect.TypeFor[json.Marshaler]()
)

// GoSchema returns the schema of the JSON encoding of Go type t, as
// encoding/json writes it: fields by their json tags, embedded structs and
// ",inline" fields inlined. A type with a JSON encoding of its own
// (metav1.Time, resource.Quantity, intstr.IntOrString, RawExtension) and
// an interface may hold anything.
func GoSchema(t reflect.Type) *Schema {
	goSchemas.Lock()
	defer goSchemas.Unlock()
	return goSchema(t)
}

func goSchema(t reflect.Type) *Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := goSchemaFor[t]; ok {
		return s
	}
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		s := &Schema{kind: object, fields: map[string]*Schema{}}
		goSchemaFor[t] = s // before the fields: types refer to themselves
		addGoFields(s, t)
		return s
	case reflect.Map:
		return &Schema{kind: mapOf, elem: goSchema(t.Elem())}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{kind: scalarOf, scalar: "string"} // base64
		}
		return &Schema{kind: listOf, elem: goSchema(t.Elem())}
	case reflect.String:
		return &Schema{kind: scalarOf, scalar: "string"}
	case reflect.Bool:
		return &Schema{kind: scalarOf, scalar: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &Schema{kind: scalarOf, scalar: "integer"}
	case reflect.Float32, reflect.Float64:
		return &Schema{kind: scalarOf, scalar: "number"}
	}
	return nil
}

func addGoFields(s *Schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		inline := name == "" && (f.Anonymous || strings.Contains(","+opts+",", ",inline,"))
		if inline && ft.Kind() == reflect.Struct && !ft.Implements(marshaler) && !reflect.PointerTo(ft).Implements(marshaler) {
			addGoFields(s, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := s.fields[name]; !taken {
			s.fields[name] = goSchema(f.Type)
		}
	}
}
