package inputs

import (
	"fmt"
	"slices"
)

// Op is what a Change does at its path.
type Op string

const (
	// OpSet puts Value at Path, adding the field or map key when its
	// object has none.
	OpSet Op = "set"
	// OpRemove deletes the field at Path.
	OpRemove Op = "remove"
	// OpAddItem inserts Value into a list: Path is the new item's, as
	// spec.targets[2] appends to a list of two.
	OpAddItem Op = "add-item"
	// OpRemoveItem deletes the list item at Path.
	OpRemoveItem Op = "remove-item"
	// OpReorder reverses the list at Path.
	OpReorder Op = "reorder"
	// OpAddKey adds the map key at Path, which must be new, with Value.
	OpAddKey Op = "add-key"
	// OpRemoveKey deletes the map key at Path.
	OpRemoveKey Op = "remove-key"
)

// A Change is one edit of an object's desired state.
type Change struct {
	// Path is where, from the object's root: dots for fields
	// (spec.replicas), [i] for list items (spec.targets[1]) and a quoted
	// key in brackets for map keys (spec.config["key"]).
	Path string
	Op   Op
	// Value is the JSON value OpSet, OpAddItem and OpAddKey put, as an
	// unstructured object holds it: map[string]any, []any, string, bool,
	// int64 for whole numbers and float64 for the rest.
	Value any
	// Why is a short reason for a reader: "its minimum", "flipped".
	Why string
	// Invalid is true when the object after this change fails validation
	// (by default a Validator's, as an update of the object it was drawn
	// from).
	Invalid bool
}

// String is the change for a reader: spec.replicas set 0 (its minimum).
func (c Change) String() string {
	s := c.Path + " " + string(c.Op)
	switch c.Op {
	case OpSet, OpAddItem, OpAddKey:
		s += " " + jsonKey(c.Value)
	}
	if c.Why != "" {
		s += " (" + c.Why + ")"
	}
	if c.Invalid {
		s += " [invalid]"
	}
	return s
}

// Apply returns a deep copy of obj with c applied; obj is not changed. It
// fails when c's path does not parse, when what the path leads to is not
// there, or when it does not hold what c's Op needs (a list for the list
// operations, an object for the others).
func Apply(obj map[string]any, c Change) (map[string]any, error) {
	p, err := parsePath(c.Path)
	if err != nil {
		return nil, err
	}
	out, _ := deepCopy(obj).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if err := apply(out, p, c.Op, deepCopy(c.Value)); err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.Path, c.Op, err)
	}
	return out, nil
}

// apply changes obj in place.
func apply(obj map[string]any, p path, op Op, value any) error {
	if op == OpReorder {
		list, ok := get(obj, p)
		if l, isList := list.([]any); ok && isList {
			slices.Reverse(l)
			return nil
		}
		return fmt.Errorf("not a list")
	}
	last := p[len(p)-1]
	parent, ok := get(obj, p[:len(p)-1])
	if !ok {
		return fmt.Errorf("%s does not exist", p[:len(p)-1].orRoot())
	}
	switch op {
	case OpSet:
		switch c := parent.(type) {
		case map[string]any:
			if last.kind != listIndex {
				c[last.key] = value
				return nil
			}
		case []any:
			if last.kind == listIndex && last.index < len(c) {
				c[last.index] = value
				return nil
			}
		}
		return fmt.Errorf("%s does not hold %s", p[:len(p)-1].orRoot(), last.describe())
	case OpRemove, OpRemoveKey, OpAddKey:
		m, ok := parent.(map[string]any)
		if !ok || last.kind == listIndex {
			return fmt.Errorf("%s is not an object", p[:len(p)-1].orRoot())
		}
		_, present := m[last.key]
		switch {
		case op == OpAddKey && present:
			return fmt.Errorf("%q is already there", last.key)
		case op == OpAddKey:
			m[last.key] = value
		case !present:
			return fmt.Errorf("no %q to remove", last.key)
		default:
			delete(m, last.key)
		}
		return nil
	case OpAddItem, OpRemoveItem:
		l, ok := parent.([]any)
		if !ok || last.kind != listIndex {
			return fmt.Errorf("%s is not a list", p[:len(p)-1].orRoot())
		}
		switch {
		case op == OpAddItem && last.index <= len(l):
			l = slices.Insert(l, last.index, value)
		case op == OpRemoveItem && last.index < len(l):
			l = slices.Delete(l, last.index, last.index+1)
		default:
			return fmt.Errorf("index %d out of range for a list of %d", last.index, len(l))
		}
		return setAt(obj, p[:len(p)-1], l)
	}
	return fmt.Errorf("unknown op %q", op)
}

// setAt replaces the value at p, which exists.
func setAt(obj map[string]any, p path, v any) error {
	if len(p) == 0 {
		return fmt.Errorf("cannot replace the object itself")
	}
	return apply(obj, p, OpSet, v)
}

func (p path) orRoot() string {
	if len(p) == 0 {
		return "the object"
	}
	return p.String()
}

func (s segment) describe() string {
	if s.kind == listIndex {
		return fmt.Sprintf("item %d", s.index)
	}
	return fmt.Sprintf("%q", s.key)
}
