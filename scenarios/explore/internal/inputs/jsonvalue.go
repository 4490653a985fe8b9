package inputs

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// deepCopy copies the maps and lists of a JSON value and normalises its
// numbers (see normalise). Values of other types are kept as they are.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return normalise(v)
	}
}

// normalise makes a Go number the type an unstructured object holds: int64
// for integers, float64 for the rest.
func normalise(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint:
		if n <= math.MaxInt64 {
			return int64(n)
		}
		return float64(n)
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n)
		}
		return float64(n)
	case float32:
		return float64(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return v
}

// number returns f as a generated number is written: int64 when whole and
// exactly representable, float64 otherwise.
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return int64(f)
	}
	return f
}

// asFloat reads a JSON number.
func asFloat(v any) (float64, bool) {
	switch n := normalise(v).(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	}
	return 0, false
}

// asInt reads a JSON number that is an integer.
func asInt(v any) (int64, bool) {
	switch n := normalise(v).(type) {
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), true
		}
	}
	return 0, false
}

func isNumber(v any) bool {
	_, ok := asFloat(v)
	return ok
}

// jsonKey is a value's identity for de-duplicating: equal JSON texts, so
// int64(1) and float64(1) are one.
func jsonKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// equal reports whether two JSON values are the same value.
func equal(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	return jsonKey(a) == jsonKey(b)
}
