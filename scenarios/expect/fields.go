package expect

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// Types is what an expression's variables hold, as far as a scenario
// knows: the schema of object (and oldObject, the same kind), and of the
// objects of each kind objects names. A nil schema, or a kind not listed,
// is not checked.
type Types struct {
	Object *Schema
	Kinds  map[string]*Schema
}

// FieldError is a field an expression reads (or a path or a partial
// object gives) that its object can never hold: a check on it could never
// be true or false (has() of it is always false), so it is a typo, not a
// field that is not there yet.
type FieldError struct {
	// Line and Column (1-based, in characters) of the field's name in the
	// expression.
	Line, Column int
	// Read is what the expression reads, as written: object.spec.replica;
	// empty for a path or a partial object.
	Read string
	// Kind is the kind's name: Deployment (apps/v1).
	Kind string
	// Path is where in the kind: spec.replica, spec.containers[].imag.
	Path string
	// Field is the name it cannot hold; Hint a field it can, of a similar
	// name, or empty.
	Field, Hint string
	// Holds, when not empty, is the type of a value that has no fields at
	// all (a string, a list): Read selects a field of it.
	Holds string
}

func (e *FieldError) Error() string {
	if e.Read == "" {
		return e.describe()
	}
	switch {
	case e.Holds == "list":
		return fmt.Sprintf("reads %s, but %s %s is a list: index it ([0]) or iterate over it (all, exists)", e.Read, e.Kind, parentPath(e.Path))
	case e.Holds != "":
		return fmt.Sprintf("reads %s, but %s %s is %s, which has no fields", e.Read, e.Kind, parentPath(e.Path), article(e.Holds))
	case e.Hint != "":
		return fmt.Sprintf("reads %s, which %s has no field %q (did you mean %q?)", e.Read, e.Kind, e.Field, e.Hint)
	}
	return fmt.Sprintf("reads %s, which %s has no field %q", e.Read, e.Kind, e.Field)
}

// article puts a or an before a type's name.
func article(name string) string {
	if strings.ContainsAny(name[:1], "aeiou") {
		return "an " + name
	}
	return "a " + name
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i > 0 {
		if p[i] == '[' {
			return p[:i+2] // keep the "[]" of a list
		}
		return p[:i]
	}
	return p
}

// CheckFields lists the fields e reads that the schemas in t say can never
// be there: a selection (object.spec.replica), has() of one, a constant
// index of an object (object.spec['replica']), an optional selection
// (object.?spec.?replica) and 'replica' in object.spec, through
// variables of all, exists, map and filter over lists of a known type.
// Maps (additionalProperties), x-kubernetes-preserve-unknown-fields and
// int-or-string values, and whatever e computes, are not checked: when
// unsure, it accepts.
func (e *Expression) CheckFields(t Types) []*FieldError {
	if t.Object == nil && len(t.Kinds) == 0 {
		return nil
	}
	c := &fieldChecker{src: []rune(e.Source), info: e.ast.NativeRep().SourceInfo()}
	scope := map[string]typed{
		"object":    {s: t.Object, read: "object"},
		"oldObject": {s: t.Object, read: "oldObject"},
	}
	if e.across {
		kinds := &Schema{kind: object, open: true, fields: map[string]*Schema{}}
		for k, s := range t.Kinds {
			if s != nil {
				kinds.fields[k] = &Schema{kind: listOf, elem: s}
			}
		}
		scope["objects"] = typed{s: kinds, read: "objects", vars: true}
	}
	c.typeOf(e.ast.NativeRep().Expr(), scope)
	slices.SortStableFunc(c.errs, func(a, b *FieldError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return c.errs
}

// element is an element of v, a list or a map, read as read and lying at
// path; an element of objects.Kind is an object of that kind.
func (v typed) element(read, path string) typed {
	out := typed{s: v.s.elem, read: read, root: v.root, path: path}
	if v.root == nil {
		out.root, out.path = v.s, path
		if v.s.elem.Name() != "" {
			out.root, out.path = v.s.elem, ""
		}
	}
	return out
}

// typed is the schema of a value an expression computes, what it reads
// (as written), and where in its kind.
type typed struct {
	s    *Schema
	read string
	// root is the kind's schema, path where s lies in it.
	root *Schema
	path string
	// vars: s maps kinds to their objects (objects), not a kind's fields.
	vars bool
}

type fieldChecker struct {
	src  []rune
	info *celast.SourceInfo
	errs []*FieldError
}

// typeOf checks x and returns what it computes, when known.
func (c *fieldChecker) typeOf(x celast.Expr, scope map[string]typed) typed {
	switch x.Kind() {
	case celast.IdentKind:
		return scope[x.AsIdent()]
	case celast.SelectKind:
		sel := x.AsSelect()
		return c.member(x.ID(), c.typeOf(sel.Operand(), scope), sel.FieldName(), "."+sel.FieldName())
	case celast.CallKind:
		call := x.AsCall()
		if call.IsMemberFunction() {
			c.typeOf(call.Target(), scope)
		}
		args := make([]typed, len(call.Args()))
		for i, a := range call.Args() {
			args[i] = c.typeOf(a, scope)
		}
		if len(args) != 2 {
			return typed{}
		}
		key, isString := constString(call.Args()[1])
		switch call.FunctionName() {
		case operators.OptSelect:
			if isString {
				return c.member(call.Args()[1].ID(), args[0], key, ".?"+key)
			}
		case operators.Index, operators.OptIndex:
			return c.index(x.ID(), args[0], call.Args()[1])
		case operators.In:
			if k, ok := constString(call.Args()[0]); ok && args[1].s != nil && args[1].s.kind == object {
				c.member(call.Args()[0].ID(), args[1], k, "["+strconv.Quote(k)+"]")
			}
		}
		return typed{}
	case celast.ComprehensionKind:
		comp := x.AsComprehension()
		rng := c.typeOf(comp.IterRange(), scope)
		c.typeOf(comp.AccuInit(), scope)
		inner := make(map[string]typed, len(scope)+3)
		for k, v := range scope {
			inner[k] = v
		}
		var elem typed
		if rng.s != nil && rng.s.kind == listOf && !rng.vars {
			elem = rng.element(comp.IterVar(), rng.path+"[]")
		}
		if comp.HasIterVar2() {
			inner[comp.IterVar()] = typed{}
			elem.read = comp.IterVar2()
			inner[comp.IterVar2()] = elem
		} else {
			inner[comp.IterVar()] = elem
		}
		inner[comp.AccuVar()] = typed{}
		c.typeOf(comp.LoopCondition(), inner)
		c.typeOf(comp.LoopStep(), inner)
		c.typeOf(comp.Result(), inner)
		return typed{}
	case celast.ListKind:
		for _, el := range x.AsList().Elements() {
			c.typeOf(el, scope)
		}
	case celast.MapKind:
		for _, en := range x.AsMap().Entries() {
			c.typeOf(en.AsMapEntry().Key(), scope)
			c.typeOf(en.AsMapEntry().Value(), scope)
		}
	case celast.StructKind:
		for _, f := range x.AsStruct().Fields() {
			c.typeOf(f.AsStructField().Value(), scope)
		}
	}
	return typed{}
}

// member is field name of v, read at the node id as suffix.
func (c *fieldChecker) member(id int64, v typed, name, suffix string) typed {
	out := typed{read: v.read + suffix, root: v.root, path: join(v.path, name)}
	if v.read == "" {
		out.read = ""
	}
	if v.vars { // objects.Kind: a list of the kind's objects
		out.s, _ = v.s.field(name)
		out.path = ""
		return out
	}
	if v.s == nil {
		return out
	}
	root := v.root
	if root == nil {
		root = v.s
	}
	out.root = root
	s, ok := v.s.field(name)
	if ok {
		out.s = s
		return out
	}
	fe := notHeld(root, v.s, v.path, name)
	fe.Read = out.read
	if fe.Read == "" {
		fe.Read = "a value's " + name
	}
	fe.Line, fe.Column = c.at(id, name)
	c.errs = append(c.errs, fe)
	return typed{}
}

// index is v[key].
func (c *fieldChecker) index(id int64, v typed, key celast.Expr) typed {
	if k, ok := constString(key); ok {
		if v.vars || (v.s != nil && v.s.kind == object) {
			return c.member(key.ID(), v, k, "["+strconv.Quote(k)+"]")
		}
	}
	if v.s == nil || v.vars {
		return typed{}
	}
	suffix := "[...]"
	if key.Kind() == celast.LiteralKind {
		suffix = "[" + fmt.Sprint(key.AsLiteral().Value()) + "]"
	}
	read := v.read + suffix
	if v.read == "" {
		read = ""
	}
	switch v.s.kind {
	case listOf:
		return v.element(read, v.path+"[]")
	case mapOf:
		return v.element(read, join(v.path, "*"))
	}
	return typed{}
}

func constString(x celast.Expr) (string, bool) {
	if x.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := x.AsLiteral().(types.String)
	return string(s), ok
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// at returns the line and column of name at or after the node id: cel-go
// places a selection at its dot.
func (c *fieldChecker) at(id int64, name string) (int, int) {
	r, ok := c.info.GetOffsetRange(id)
	start := 0
	if ok {
		start = int(r.Start)
	}
	if start < 0 || start > len(c.src) {
		start = 0
	}
	if i := runeIndex(c.src[start:], []rune(name)); i >= 0 {
		start += i
	}
	line, col := 1, 1
	for _, ch := range c.src[:start] {
		if ch == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return line, col
}

func runeIndex(s, sub []rune) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slices.Equal(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// closest returns the name among names nearest to name by edit distance,
// when near enough to be what was meant.
func closest(name string, names []string) string {
	best, bestD := "", 0
	for _, n := range names {
		d := distance(strings.ToLower(name), strings.ToLower(n))
		if d > 2 || d*3 > len(name) {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the edit distance between a and b, a swap of two
// neighbours counting as one edit (optimal string alignment).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
