package expect

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
)

// unstructuredContent is what *unstructured.Unstructured offers, so that
// one can be passed where a map is expected.
type unstructuredContent interface {
	UnstructuredContent() map[string]any
}

// asMap returns v as a map with string keys. Maps of other types (such as
// map[string]string built by hand) are copied, which is slower but rare.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case nil, string, bool, int64, float64, []any:
		return nil, false
	case unstructuredContent:
		return m.UnstructuredContent(), true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map {
		return nil, false
	}
	out := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		k := it.Key()
		if k.Kind() == reflect.Interface {
			k = k.Elem()
		}
		key := fmt.Sprint(k.Interface())
		if k.Kind() == reflect.String {
			key = k.String()
		}
		out[key] = it.Value().Interface()
	}
	return out, true
}

// asList returns v as a list. Slices of other types are copied.
func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case nil, string, bool, int64, float64, map[string]any:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// number is a numeric value: an int64 when isInt, else a float64. Keeping
// ints as ints compares int64s above 2^53 exactly.
type number struct {
	i     int64
	f     float64
	isInt bool
}

func toNumber(v any) (number, bool) {
	switch n := v.(type) {
	case int64:
		return number{i: n, isInt: true}, true
	case float64:
		return number{f: n}, true
	case int:
		return number{i: int64(n), isInt: true}, true
	case int32:
		return number{i: int64(n), isInt: true}, true
	case int16:
		return number{i: int64(n), isInt: true}, true
	case int8:
		return number{i: int64(n), isInt: true}, true
	case uint:
		return fromUint(uint64(n)), true
	case uint64:
		return fromUint(n), true
	case uint32:
		return number{i: int64(n), isInt: true}, true
	case uint16:
		return number{i: int64(n), isInt: true}, true
	case uint8:
		return number{i: int64(n), isInt: true}, true
	case float32:
		return number{f: float64(n)}, true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return number{i: i, isInt: true}, true
		}
		if f, err := n.Float64(); err == nil {
			return number{f: f}, true
		}
	}
	return number{}, false
}

func fromUint(u uint64) number {
	if u > math.MaxInt64 {
		return number{f: float64(u)}
	}
	return number{i: int64(u), isInt: true}
}

func (n number) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

func (n number) equal(o number) bool {
	switch {
	case n.isInt && o.isInt:
		return n.i == o.i
	case !n.isInt && !o.isInt:
		return n.f == o.f
	case n.isInt:
		return floatIsInt(o.f, n.i)
	default:
		return floatIsInt(n.f, o.i)
	}
}

// floatIsInt reports whether f is exactly i.
func floatIsInt(f float64, i int64) bool {
	return f >= math.MinInt64 && f < math.MaxInt64 && f == math.Trunc(f) && int64(f) == i
}

func (n number) quantity() (resource.Quantity, bool) {
	if n.isInt {
		return *resource.NewQuantity(n.i, resource.DecimalSI), true
	}
	if math.IsNaN(n.f) || math.IsInf(n.f, 0) {
		return resource.Quantity{}, false
	}
	return parseQuantity(strconv.FormatFloat(n.f, 'g', -1, 64))
}

// parseQuantity parses s as a resource.Quantity, quickly refusing what
// cannot be one (most strings), since Match tries it on every pair of
// differing strings.
func parseQuantity(s string) (resource.Quantity, bool) {
	if s == "" || !strings.ContainsRune("+-.0123456789", rune(s[0])) {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// Number returns v as a float64 for charting: any Go number, a
// json.Number, a resource.Quantity, or a string that is a quantity ("3",
// "250m", "1Gi"). NaN and infinities are not numbers to a chart.
func Number(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case string:
		q, ok := parseQuantity(x)
		if !ok {
			return 0, false
		}
		f = q.AsApproximateFloat64()
	case resource.Quantity:
		f = x.AsApproximateFloat64()
	case *resource.Quantity:
		if x == nil {
			return 0, false
		}
		f = x.AsApproximateFloat64()
	default:
		n, ok := toNumber(v)
		if !ok {
			return 0, false
		}
		f = n.float()
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// scalarEqual compares two values that are not maps or lists, by the
// rules in the package doc.
func scalarEqual(exp, act any) bool {
	switch e := exp.(type) {
	case string:
		if a, ok := act.(string); ok {
			if e == a {
				return true
			}
			qe, ok1 := parseQuantity(e)
			qa, ok2 := parseQuantity(a)
			return ok1 && ok2 && qe.Cmp(qa) == 0
		}
		if n, ok := toNumber(act); ok {
			return quantityIs(e, n)
		}
		return false
	case bool:
		a, ok := act.(bool)
		return ok && a == e
	}
	if ne, ok := toNumber(exp); ok {
		if na, ok := toNumber(act); ok {
			return ne.equal(na)
		}
		if s, ok := act.(string); ok {
			return quantityIs(s, ne)
		}
		return false
	}
	return reflect.DeepEqual(exp, act)
}

// quantityIs reports whether s is a quantity equal to n.
func quantityIs(s string, n number) bool {
	q, ok := parseQuantity(s)
	if !ok {
		return false
	}
	nq, ok := n.quantity()
	return ok && q.Cmp(nq) == 0
}

// maxFormatted bounds a value as Mismatch.String prints it, in bytes.
const maxFormatted = 120

// formatValue prints v in YAML flow style ({type: Ready, status: "True"}),
// keys sorted, cut to about maxFormatted bytes.
func formatValue(v any) string {
	var b strings.Builder
	writeValue(&b, v)
	s := b.String()
	if len(s) > maxFormatted {
		cut := maxFormatted - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func writeValue(b *strings.Builder, v any) {
	if b.Len() > maxFormatted {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return
	case string:
		writeString(b, x)
		return
	case bool:
		b.WriteString(strconv.FormatBool(x))
		return
	case json.Number:
		b.WriteString(x.String())
		return
	}
	if n, ok := toNumber(v); ok {
		switch {
		case n.isInt:
			b.WriteString(strconv.FormatInt(n.i, 10))
		case n.f == math.Trunc(n.f) && math.Abs(n.f) < 1e21:
			// As JSON writes it: 3, not 3e+00.
			b.WriteString(strconv.FormatFloat(n.f, 'f', -1, 64))
		default:
			b.WriteString(strconv.FormatFloat(n.f, 'g', -1, 64))
		}
		return
	}
	if m, ok := asMap(v); ok {
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if b.Len() > maxFormatted {
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, k)
			b.WriteString(": ")
			writeValue(b, m[k])
		}
		b.WriteByte('}')
		return
	}
	if l, ok := asList(v); ok {
		b.WriteByte('[')
		for i, e := range l {
			if b.Len() > maxFormatted {
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
		return
	}
	fmt.Fprint(b, v)
}

// writeString writes s bare when YAML would read it back as the same
// string, quoted otherwise ("True", "3", "a b").
func writeString(b *strings.Builder, s string) {
	if yamlPlain(s) {
		b.WriteString(s)
		return
	}
	b.WriteString(strconv.Quote(s))
}

func yamlPlain(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isPlainByte(c) && c != '.' && c != '/' {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	return true
}
