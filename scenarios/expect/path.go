package expect

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxPathLength bounds a path, in bytes.
const MaxPathLength = 1024

// maxIndex bounds a list index in a path: no object has a longer list, and
// it keeps the index an int everywhere.
const maxIndex = 1 << 30

// Segment is one step of a Path: a map key or a list index.
type Segment struct {
	// Key is the map key, when Index is -1.
	Key string
	// Index is the list index, or -1 for a map key.
	Index int
}

// Path is a parsed field path, such as spec.template.spec.containers[0].image
// or metadata.annotations["converge.dev/max-replicas"].
type Path []Segment

// PathError says where a path is malformed.
type PathError struct {
	Path string
	// Column is the 1-based byte offset of the problem in Path.
	Column  int
	Message string
}

func (e *PathError) Error() string {
	p := e.Path
	if len(p) > 80 {
		p = p[:80] + "..."
	}
	return fmt.Sprintf("path %q, column %d: %s", p, e.Column, e.Message)
}

// ParsePath parses a field path: map keys joined by dots, list indexes in
// brackets ([0]), and keys that are not plain words (letters, digits, _
// and -) quoted in brackets (["a.b/c"] with Go escapes, or ['a.b/c']). A
// leading dot, as kubectl writes them, is allowed.
func ParsePath(s string) (Path, error) {
	bad := func(at int, format string, args ...any) (Path, error) {
		return nil, &PathError{Path: s, Column: at + 1, Message: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return bad(0, "empty path")
	}
	if len(s) > MaxPathLength {
		return bad(MaxPathLength, "longer than %d bytes", MaxPathLength)
	}
	i := 0
	if s[0] == '.' {
		i = 1
	}
	var p Path
	first := true
	for {
		switch {
		case i < len(s) && s[i] == '[':
			seg, next, err := parseBracket(s, i)
			if err != nil {
				return nil, err
			}
			p, i = append(p, seg), next
		case first || (i < len(s) && s[i] == '.'):
			if !first {
				i++
			}
			j := i
			for j < len(s) && isPlainByte(s[j]) {
				j++
			}
			if j == i {
				if j < len(s) && s[j] != '.' {
					return bad(j, "unexpected %q, want a key", s[j])
				}
				return bad(j, "empty key")
			}
			p, i = append(p, Segment{Key: s[i:j], Index: -1}), j
		case i == len(s):
			return p, nil
		default:
			return bad(i, "unexpected %q, want . or [", s[i])
		}
		first = false
	}
}

// parseBracket parses the [...] at s[at], returning its segment and the
// offset after it.
func parseBracket(s string, at int) (Segment, int, error) {
	bad := func(i int, format string, args ...any) (Segment, int, error) {
		return Segment{}, 0, &PathError{Path: s, Column: i + 1, Message: fmt.Sprintf(format, args...)}
	}
	i := at + 1
	if i == len(s) {
		return bad(at, "unterminated [")
	}
	var seg Segment
	switch c := s[i]; {
	case c >= '0' && c <= '9':
		j := i
		n := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			if n > maxIndex {
				return bad(i, "index larger than %d", maxIndex)
			}
			j++
		}
		seg, i = Segment{Index: n}, j
	case c == '"':
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return bad(i, "unterminated string")
		}
		key, err := strconv.Unquote(s[i : j+1])
		if err != nil {
			return bad(i, "invalid quoted string")
		}
		seg, i = Segment{Key: key, Index: -1}, j+1
	case c == '\'':
		j := strings.IndexByte(s[i+1:], '\'')
		if j < 0 {
			return bad(i, "unterminated string")
		}
		seg, i = Segment{Key: s[i+1 : i+1+j], Index: -1}, i+j+2
	default:
		return bad(i, "unexpected %q, want an index or a quoted key", c)
	}
	if i == len(s) || s[i] != ']' {
		return bad(at, "unterminated [")
	}
	return seg, i + 1, nil
}

func isPlainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := range len(k) {
		if !isPlainByte(k[i]) {
			return false
		}
	}
	return true
}

// String formats p so that ParsePath reads it back.
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		s.appendTo(&b, i == 0)
	}
	return b.String()
}

func (s Segment) appendTo(b *strings.Builder, first bool) {
	switch {
	case s.Index >= 0:
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(s.Index))
		b.WriteByte(']')
	case isPlainKey(s.Key):
		if !first {
			b.WriteByte('.')
		}
		b.WriteString(s.Key)
	default:
		b.WriteByte('[')
		b.WriteString(strconv.Quote(s.Key))
		b.WriteByte(']')
	}
}

// Get returns the value at p in v, and whether it is there. A value that is
// there and null is (nil, true).
func (p Path) Get(v any) (any, bool) {
	for _, s := range p {
		if s.Index < 0 {
			m, ok := asMap(v)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.Key]; !ok {
				return nil, false
			}
			continue
		}
		l, ok := asList(v)
		if !ok || s.Index >= len(l) {
			return nil, false
		}
		v = l[s.Index]
	}
	return v, true
}

// Field returns the value at path ("status.readyReplicas",
// `metadata.annotations["a.b/c"]`, "spec.items[0].name") in obj, and
// whether it was there. A malformed path is never there; check paths at
// load time with ParsePath, and parse once with it where Field would run
// in a loop.
func Field(obj map[string]any, path string) (any, bool) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, false
	}
	return p.Get(obj)
}
