package inputs

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// typeOf is the type a value is judged by: the schema's, or for an
// int-or-string the one the value has.
func typeOf(s *structuralschema.Structural, v any) string {
	if !s.XIntOrString {
		return s.Type
	}
	switch v.(type) {
	case string:
		return "string"
	case nil:
		return "integer"
	}
	if isNumber(v) {
		return "integer"
	}
	return ""
}

// holds reports whether v is a value of type t.
func holds(t string, v any) bool {
	switch t {
	case "integer":
		_, ok := asInt(v)
		return ok
	case "number":
		return isNumber(v)
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func enumOf(s *structuralschema.Structural) []any {
	if s.ValueValidation == nil {
		return nil
	}
	out := make([]any, 0, len(s.ValueValidation.Enum))
	for _, e := range s.ValueValidation.Enum {
		out = append(out, deepCopy(e.Object))
	}
	return out
}

// outsideEnum returns a value of cur's type that enum lacks.
func outsideEnum(cur any, enum []any) (any, bool) {
	in := func(v any) bool { return slices.ContainsFunc(enum, func(e any) bool { return equal(e, v) }) }
	switch c := cur.(type) {
	case string:
		for _, m := range mutations(c) {
			if !in(m) {
				return m, true
			}
		}
	case bool:
		if !in(!c) {
			return !c, true
		}
	default:
		top, ok := asFloat(cur)
		if !ok {
			return nil, false
		}
		for _, e := range enum {
			if f, ok := asFloat(e); ok && f > top {
				top = f
			}
		}
		if top+1 > top {
			return number(math.Floor(top) + 1), true
		}
	}
	return nil, false
}

// intRange is what an integer schema allows.
type intRange struct {
	lo, hi       int64
	hasLo, hasHi bool
	step         int64 // multipleOf, when a whole number; else 1
	multiple     bool
}

func intRangeOf(s *structuralschema.Structural) intRange {
	r := intRange{lo: math.MinInt64, hi: math.MaxInt64, step: 1}
	vv := s.ValueValidation
	if vv == nil {
		return r
	}
	if m := vv.Minimum; m != nil && !math.IsNaN(*m) {
		lo := math.Ceil(*m)
		if vv.ExclusiveMinimum && lo == *m {
			lo++
		}
		r.lo, r.hasLo = clampInt(lo), true
	}
	if m := vv.Maximum; m != nil && !math.IsNaN(*m) {
		hi := math.Floor(*m)
		if vv.ExclusiveMaximum && hi == *m {
			hi--
		}
		r.hi, r.hasHi = clampInt(hi), true
	}
	if m := vv.MultipleOf; m != nil && *m >= 1 && *m == math.Trunc(*m) && *m <= 1<<53 {
		r.step, r.multiple = int64(*m), true
	}
	return r
}

func clampInt(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

func (r intRange) allows(x int64) bool {
	return x >= r.lo && x <= r.hi && (!r.multiple || x%r.step == 0)
}

// min is the least value allowed, if any; max the greatest.
func (r intRange) min() int64 {
	if m := r.lo % r.step; r.multiple && m != 0 {
		if m < 0 {
			return r.lo - m
		}
		if x, ok := addInt(r.lo, r.step-m); ok {
			return x
		}
	}
	return r.lo
}

func (r intRange) max() int64 {
	if m := r.hi % r.step; r.multiple && m != 0 {
		if m > 0 {
			return r.hi - m
		}
		if x, ok := addInt(r.hi, -r.step-m); ok {
			return x
		}
	}
	return r.hi
}

// addInt is a + b, unless it overflows.
func addInt(a, b int64) (int64, bool) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return 0, false
	}
	return c, true
}

// larger is twice x's magnitude plus one: a value past x for a field with
// no maximum, without leaping to the type's end.
func larger(x int64) (int64, bool) {
	if x < 0 {
		if x == math.MinInt64 {
			return 0, false
		}
		x = -x
	}
	if x > (math.MaxInt64-1)/2 {
		return 0, false
	}
	return 2*x + 1, true
}

// floatRange is what a number schema allows.
type floatRange struct {
	lo, hi       float64
	hasLo, hasHi bool
	exLo, exHi   bool
	multipleOf   float64
}

func floatRangeOf(s *structuralschema.Structural) floatRange {
	var r floatRange
	vv := s.ValueValidation
	if vv == nil {
		return r
	}
	if m := vv.Minimum; m != nil && !math.IsNaN(*m) {
		r.lo, r.hasLo, r.exLo = *m, true, vv.ExclusiveMinimum
	}
	if m := vv.Maximum; m != nil && !math.IsNaN(*m) {
		r.hi, r.hasHi, r.exHi = *m, true, vv.ExclusiveMaximum
	}
	if m := vv.MultipleOf; m != nil && *m > 0 {
		r.multipleOf = *m
	}
	return r
}

func (r floatRange) allows(f float64) bool {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return false
	case r.hasLo && (f < r.lo || r.exLo && f == r.lo):
		return false
	case r.hasHi && (f > r.hi || r.exHi && f == r.hi):
		return false
	case r.multipleOf > 0:
		q := f / r.multipleOf
		return q == math.Trunc(q)
	}
	return true
}

// stringRule is what a string schema allows, when Changes can honour it.
type stringRule struct {
	minLen, maxLen int64 // maxLen < 0: none
	re             *regexp.Regexp
}

// stringRuleOf is false for a string with a format, or with a pattern Go
// cannot compile (the server could not either).
func stringRuleOf(s *structuralschema.Structural) (stringRule, bool) {
	r := stringRule{maxLen: -1}
	vv := s.ValueValidation
	if vv == nil {
		return r, true
	}
	if vv.Format != "" {
		return r, false
	}
	if vv.MinLength != nil {
		r.minLen = *vv.MinLength
	}
	if vv.MaxLength != nil {
		r.maxLen = *vv.MaxLength
	}
	if vv.Pattern != "" {
		re, err := regexp.Compile(vv.Pattern)
		if err != nil {
			return r, false
		}
		r.re = re
	}
	return r, true
}

func (r stringRule) fits(x string) bool {
	n := int64(utf8.RuneCountInString(x))
	return n >= r.minLen && (r.maxLen < 0 || n <= r.maxLen) && (r.re == nil || r.re.MatchString(x))
}

// others are the strings near cur that r allows, cur aside.
func (r stringRule) others(cur string) []string {
	cands := mutations(cur)
	if r.minLen > 0 && r.minLen <= maxProbeLength {
		n := int(r.minLen)
		cands = append(cands, strings.Repeat("x", n), strings.Repeat("a", n), strings.Repeat("0", n))
	}
	var out []string
	for _, c := range cands {
		if c != cur && r.fits(c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// mutations are small edits of s, the likelier to keep a pattern first.
func mutations(s string) []string {
	out := []string{s + "-x", s + "x", s + "0"}
	if s != "" {
		r := []rune(s)
		base := string(r[:len(r)-1])
		for _, c := range []string{"x", "y", "0", "1"} {
			out = append(out, base+c)
		}
	}
	for i := 2; i <= 9; i++ {
		out = append(out, fmt.Sprintf("%s-%d", s, i))
	}
	return append(out, "x", "y", "0", "1")
}

// alternatives are values s allows near cur, cur aside, the nearest first:
// what a list's new item takes to differ from the items already there.
func alternatives(s *structuralschema.Structural, cur any) []any {
	if s == nil {
		return nil
	}
	var out []any
	add := func(v any) {
		if !equal(v, cur) && !slices.ContainsFunc(out, func(o any) bool { return equal(o, v) }) {
			out = append(out, v)
		}
	}
	if enum := enumOf(s); len(enum) > 0 {
		for _, e := range enum {
			add(e)
		}
		return out
	}
	switch typeOf(s, cur) {
	case "integer":
		c, _ := asInt(cur)
		r := intRangeOf(s)
		for _, sign := range []int64{1, -1} {
			for k := int64(1); k <= 8; k++ {
				if x, ok := addInt(c, sign*k*r.step); ok && r.allows(x) {
					add(x)
				}
			}
		}
	case "number":
		c, _ := asFloat(cur)
		r := floatRangeOf(s)
		for _, d := range []float64{1, 2, 3, 4, -1, -2, -3, -4} {
			if r.allows(c + d) {
				add(number(c + d))
			}
		}
	case "string":
		c, _ := cur.(string)
		if r, ok := stringRuleOf(s); ok {
			for _, o := range r.others(c) {
				add(o)
			}
		}
	case "boolean":
		c, _ := cur.(bool)
		add(!c)
	}
	return out
}

// minimal is the least value s allows: its default, its first enum value,
// zero, false, the shortest string that fits, an empty list, or an object
// of its required fields, each minimal; false when there is none Changes
// can build.
func minimal(s *structuralschema.Structural, depth int) (any, bool) {
	if s == nil || depth > maxDepth {
		return nil, false
	}
	if s.Default.Object != nil {
		return deepCopy(s.Default.Object), true
	}
	if enum := enumOf(s); len(enum) > 0 {
		return enum[0], true
	}
	if s.XEmbeddedResource {
		return nil, false
	}
	switch typeOf(s, nil) {
	case "integer":
		r := intRangeOf(s)
		for _, x := range []int64{0, r.min(), r.max()} {
			if r.allows(x) {
				return x, true
			}
		}
	case "number":
		r := floatRangeOf(s)
		for _, x := range []float64{0, r.lo, r.lo + 1, r.hi, r.hi - 1} {
			if r.allows(x) {
				return number(x), true
			}
		}
	case "boolean":
		return false, true
	case "string":
		r, ok := stringRuleOf(s)
		if !ok {
			return nil, false
		}
		if r.fits("") {
			return "", true
		}
		if others := r.others(""); len(others) > 0 {
			return others[0], true
		}
	case "array":
		vv := s.ValueValidation
		switch {
		case vv == nil || vv.MinItems == nil || *vv.MinItems <= 0:
			return []any{}, true
		case *vv.MinItems == 1:
			if item, ok := minimal(s.Items, depth+1); ok {
				return []any{item}, true
			}
		}
	case "object":
		m := map[string]any{}
		vv := s.ValueValidation
		if vv == nil {
			return m, true
		}
		required := slices.Clone(vv.Required)
		slices.Sort(required)
		for _, name := range slices.Compact(required) {
			ps, ok := s.Properties[name]
			if !ok {
				return nil, false
			}
			v, ok := minimal(&ps, depth+1)
			if !ok {
				return nil, false
			}
			m[name] = v
		}
		if vv.MinProperties != nil && int64(len(m)) < *vv.MinProperties {
			return nil, false
		}
		return m, true
	}
	return nil, false
}
