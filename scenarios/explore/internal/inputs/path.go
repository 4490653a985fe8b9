package inputs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A segment is one step of a path: a field (.name), a map key (["k"]) or a
// list index ([i]). Fields and map keys both name a key of a JSON object:
// they differ only in how a path is written.
type segment struct {
	key   string
	index int
	kind  segmentKind
}

type segmentKind int

const (
	fieldName segmentKind = iota
	mapKey
	listIndex
)

type path []segment

// parsePath reads a path written as Change.Path is: spec.replicas,
// spec.targets[1], spec.config["key"].
func parsePath(p string) (path, error) {
	var out path
	rest := p
	for first := true; rest != ""; first = false {
		switch {
		case strings.HasPrefix(rest, `["`):
			quoted, err := strconv.QuotedPrefix(rest[1:])
			if err != nil || !strings.HasPrefix(rest[1+len(quoted):], "]") {
				return nil, fmt.Errorf("path %q: a map key is a quoted string in brackets", p)
			}
			key, err := strconv.Unquote(quoted)
			if err != nil {
				return nil, fmt.Errorf("path %q: %w", p, err)
			}
			out = append(out, segment{key: key, kind: mapKey})
			rest = rest[1+len(quoted)+1:]
		case strings.HasPrefix(rest, "["):
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", p)
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 {
				return nil, fmt.Errorf("path %q: a list index is a non-negative integer", p)
			}
			out = append(out, segment{index: i, kind: listIndex})
			rest = rest[end+1:]
		default:
			if !first {
				if !strings.HasPrefix(rest, ".") {
					return nil, fmt.Errorf("path %q: want . or [ before %q", p, rest)
				}
				rest = rest[1:]
			}
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("path %q: empty field name", p)
			}
			out = append(out, segment{key: rest[:end], kind: fieldName})
			rest = rest[end:]
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty path")
	}
	return out, nil
}

// String writes the path as parsePath reads it. A field whose name would
// not read back as one is written as a map key.
func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.kind == listIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case s.kind == fieldName && plainField(s.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			fmt.Fprintf(&b, "[%s]", strconv.Quote(s.key))
		}
	}
	return b.String()
}

func plainField(name string) bool {
	return name != "" && !strings.ContainsAny(name, `.["]`)
}

// child returns p followed by s, sharing nothing with p.
func (p path) child(s segment) path {
	return append(p[:len(p):len(p)], s)
}

func (p path) field(name string) path { return p.child(segment{key: name, kind: fieldName}) }
func (p path) key(k string) path      { return p.child(segment{key: k, kind: mapKey}) }
func (p path) index(i int) path       { return p.child(segment{index: i, kind: listIndex}) }

// id is the path with fields and map keys alike, for comparing paths
// written either way.
func (p path) id() string {
	var b strings.Builder
	for _, s := range p {
		if s.kind == listIndex {
			fmt.Fprintf(&b, "[%d]", s.index)
		} else {
			fmt.Fprintf(&b, "[%s]", strconv.Quote(s.key))
		}
	}
	return b.String()
}

// within reports whether p is at or under q.
func (p path) within(q path) bool {
	if len(q) > len(p) {
		return false
	}
	for i, s := range q {
		if (s.kind == listIndex) != (p[i].kind == listIndex) || s.key != p[i].key || s.index != p[i].index {
			return false
		}
	}
	return true
}

// get returns the value at p in obj.
func get(obj map[string]any, p path) (any, bool) {
	var v any = obj
	for _, s := range p {
		switch c := v.(type) {
		case map[string]any:
			if s.kind == listIndex {
				return nil, false
			}
			var ok bool
			if v, ok = c[s.key]; !ok {
				return nil, false
			}
		case []any:
			if s.kind != listIndex || s.index >= len(c) {
				return nil, false
			}
			v = c[s.index]
		default:
			return nil, false
		}
	}
	return v, true
}

// FieldUnder is the name of the field directly under root on path: "port"
// for spec.port under spec, "targets" for spec.targets[1].port. An error
// when path does not parse or is not below root.
func FieldUnder(root, p string) (string, error) {
	r, err := parsePath(root)
	if err != nil {
		return "", err
	}
	full, err := parsePath(p)
	if err != nil {
		return "", err
	}
	if len(full) <= len(r) {
		return "", fmt.Errorf("path %q is not below %q", p, root)
	}
	for i, seg := range r {
		if full[i].kind == listIndex || seg.kind == listIndex || full[i].key != seg.key {
			return "", fmt.Errorf("path %q is not below %q", p, root)
		}
	}
	next := full[len(r)]
	if next.kind == listIndex {
		return "", fmt.Errorf("path %q: %q is a list", p, root)
	}
	return next.key, nil
}

// ValueAt returns the value at path p of obj, written as Change.Path;
// false when p does not parse or obj has nothing there.
func ValueAt(obj map[string]any, p string) (any, bool) {
	q, err := parsePath(p)
	if err != nil {
		return nil, false
	}
	return get(obj, q)
}
