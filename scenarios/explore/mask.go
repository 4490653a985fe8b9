package explore

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Masks name the fields an end-state comparison ignores: what differs
// between two fault-free runs of a correct controller for reasons that are
// not its behaviour (identities, timestamps, counters of the server).
type Masks struct {
	// Keys are field names ignored wherever they appear: "uid". A * in a
	// key matches any run of characters: "*ResourceVersion" masks
	// status.sourceResourceVersion, a copy of another object's.
	Keys []string `json:"keys,omitempty"`
	// Paths are dotted paths from the object's root, list indexes written
	// [*]; a path masks everything under it. "Kind:path" masks it in one
	// kind only: "Lease:spec".
	Paths []string `json:"paths,omitempty"`
}

// DefaultMasks are the static masks: identities and counters the API
// server assigns, timestamps, and the Lease of leader election, which
// belongs to whichever instance won.
func DefaultMasks() Masks {
	return Masks{
		Keys: []string{"uid", "resourceVersion", "*ResourceVersion", "creationTimestamp", "managedFields", "generation",
			"observedGeneration", "lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime", "renewTime", "acquireTime",
			"deletionGracePeriodSeconds", "selfLink"},
		Paths: []string{"metadata.annotations.deployment.kubernetes.io/revision", "Lease:spec", "Event:*", "Pod:spec.nodeName",
			"Pod:status.podIP", "Pod:status.podIPs", "Pod:status.hostIP", "Pod:status.hostIPs", "Pod:status.startTime"},
	}
}

// With is m and other together, without repeats.
func (m Masks) With(other Masks) Masks {
	out := Masks{Keys: slices.Clone(m.Keys), Paths: slices.Clone(m.Paths)}
	for _, k := range other.Keys {
		if !slices.Contains(out.Keys, k) {
			out.Keys = append(out.Keys, k)
		}
	}
	for _, p := range other.Paths {
		if !slices.Contains(out.Paths, p) {
			out.Paths = append(out.Paths, p)
		}
	}
	sort.Strings(out.Paths)
	return out
}

// Validate says what is wrong with m.
func (m Masks) Validate() error {
	for _, k := range m.Keys {
		if k == "" || strings.ContainsAny(k, ".[]") || strings.Trim(k, "*") == "" {
			return fmt.Errorf("mask key %q: a key is one field name (use paths for a path)", k)
		}
	}
	for _, p := range m.Paths {
		if p == "" || strings.HasSuffix(p, ":") {
			return fmt.Errorf("mask path %q is empty", p)
		}
	}
	return nil
}

// masked reports whether field (a flattened path) of an object of kind is
// ignored.
func (m Masks) masked(kind, field string) bool {
	for _, seg := range segments(field) {
		for _, k := range m.Keys {
			if k == seg || strings.Contains(k, "*") && globMatch(k, seg) {
				return true
			}
		}
	}
	short := shortKind(kind)
	for _, p := range m.Paths {
		if k, path, ok := strings.Cut(p, ":"); ok {
			if k != short {
				continue
			}
			p = path
		}
		if p == "*" || field == p || strings.HasPrefix(field, p+".") || strings.HasPrefix(field, p+"[") {
			return true
		}
	}
	return false
}

// globMatch matches s against pattern, where * is any run of characters.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		last := i == len(parts)-2
		if last {
			return strings.HasSuffix(s, p)
		}
		j := strings.Index(s, p)
		if j < 0 {
			return false
		}
		s = s[j+len(p):]
	}
	return s == ""
}

// shortKind is "Deployment" of "apps/v1 Deployment".
func shortKind(kind string) string {
	if i := strings.LastIndexByte(kind, ' '); i >= 0 {
		return kind[i+1:]
	}
	return kind
}

// segments are the field names of a flattened path, indexes dropped:
// "status.conditions[*].type" -> status, conditions, type. A key holding
// a dot (an annotation) is one segment in the flattened path only as a
// whole, so the keys mask matches whole names.
func segments(field string) []string {
	parts := strings.Split(strings.ReplaceAll(field, "[*]", ""), ".")
	return parts
}

var timestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

// flatten is obj as leaf path -> value, list indexes kept as [i] in the
// key and [*] in the field name. Values that are timestamps become
// "<time>": their presence counts, not their value. A number is written
// as JSON carries it (flatNumber), whichever Go type holds it.
func flatten(obj map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[prefix] = "{}"
			}
			for k, e := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case []any:
			if len(x) == 0 {
				out[prefix] = "[]"
			}
			for i, e := range x {
				walk(prefix+"["+strconv.Itoa(i)+"]", e)
			}
		case string:
			if timestamp.MatchString(x) {
				x = "<time>"
			}
			out[prefix] = strconv.Quote(x)
		case nil:
			out[prefix] = "null"
		default:
			if n, ok := flatNumber(x); ok {
				out[prefix] = n
				return
			}
			out[prefix] = fmt.Sprint(x)
		}
	}
	walk("", obj)
	return out
}

// flatNumber writes a number as the float64 a JSON decoder reads it as,
// in JSON's spelling: an object whose integers were kept as int64 (as the
// API machinery decodes, and a run holds its objects) and the same object
// read back from a file (float64) flatten alike, large numbers included
// (fmt writes float64(1048576) as 1.048576e+06). False for no number.
func flatNumber(v any) (string, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	case int32:
		f = float64(n)
	case uint64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return string(n), true
		}
	default:
		return "", false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f), true
	}
	b, _ := json.Marshal(f)
	return string(b), true
}

var index = regexp.MustCompile(`\[\d+\]`)

// field is a flattened key with its list indexes written [*].
func field(key string) string { return index.ReplaceAllString(key, "[*]") }
