package expect

import (
	"fmt"
	"sort"
)

// CheckValue lists what of value, written at p in an object of s's kind,
// no such object can hold: a key of p, then a key of value (a partial
// object, as Match reads one: maps by key, each element of a list against
// the list's items). p may be empty, value nil. Like CheckFields, it
// accepts what it cannot follow: keys of maps, preserved unknown fields,
// a value of a shape the schema does not give there.
func (s *Schema) CheckValue(p Path, value any) []*FieldError {
	if s == nil {
		return nil
	}
	root, cur, at := s, s, ""
	for _, seg := range p {
		if seg.Index >= 0 {
			if cur == nil || cur.kind != listOf {
				return nil
			}
			cur, at = cur.elem, at+"[]"
			continue
		}
		next, ok := cur.field(seg.Key)
		if !ok {
			return []*FieldError{notHeld(root, cur, at, seg.Key)}
		}
		cur, at = next, join(at, seg.Key)
	}
	var out []*FieldError
	checkValue(root, cur, at, value, &out)
	return out
}

func checkValue(root, s *Schema, at string, value any, out *[]*FieldError) {
	if s == nil {
		return
	}
	switch v := value.(type) {
	case map[string]any:
		if s.kind != object && s.kind != mapOf {
			return
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			next, ok := s.field(k)
			if !ok {
				*out = append(*out, notHeld(root, s, at, k))
				continue
			}
			checkValue(root, next, join(at, k), v[k], out)
		}
	case []any:
		if s.kind != listOf {
			return
		}
		for _, e := range v {
			checkValue(root, s.elem, at+"[]", e, out)
		}
	}
}

// notHeld is the error for field name of s, at path at in root's kind.
func notHeld(root, s *Schema, at, name string) *FieldError {
	fe := &FieldError{Kind: root.Name(), Path: join(at, name), Field: name}
	switch s.kind {
	case object:
		fe.Hint = closest(name, s.fieldNames())
	case listOf:
		fe.Holds = "list"
	case scalarOf:
		fe.Holds = s.scalar
	}
	return fe
}

// describe is e's message when it comes from a path or a partial object,
// not an expression: Read is empty.
func (e *FieldError) describe() string {
	switch {
	case e.Holds == "list":
		return fmt.Sprintf("%s %s is a list, which has no fields", e.Kind, parentPath(e.Path))
	case e.Holds != "":
		return fmt.Sprintf("%s %s is %s, which has no fields", e.Kind, parentPath(e.Path), article(e.Holds))
	case e.Hint != "":
		return fmt.Sprintf("%s has no field %s (did you mean %q?)", e.Kind, e.Path, e.Hint)
	}
	return fmt.Sprintf("%s has no field %s", e.Kind, e.Path)
}
