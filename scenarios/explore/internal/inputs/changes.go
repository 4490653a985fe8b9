package inputs

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// The caps that keep Changes' work bounded on any input.
const (
	// maxDepth is how far below the root Changes descends.
	maxDepth = 16
	// headItems is how many first items of a list, or first keys of a map
	// in sorted order, Changes descends into; it descends into the last one
	// too.
	headItems = 3
	// maxCandidates is how many changes Changes draws and judges at most.
	maxCandidates = 1000
	// maxInvalid is how many refused changes Changes returns at most.
	maxInvalid = 10
	// maxProbeLength is the longest string drawn to break a length limit.
	maxProbeLength = 4096
	// addedKey is the key a map's added entry takes ("converge-added-2"
	// and on when the map has it).
	addedKey = "converge-added"
)

// Rules are a user's say over the changes drawn. Paths are written as
// Change.Path; fields and map keys match whichever way they are written.
type Rules struct {
	// Pin lists paths whose values no change may alter: nothing is drawn
	// at or under them, and a change elsewhere that would alter them
	// (removing their parent, reversing their list) is dropped.
	Pin []string
	// Exclude lists paths nothing is drawn at or under. A change above
	// one may still replace it.
	Exclude []string
	// Values are values to set at a path, besides the drawn ones, judged
	// like them. Pin and Exclude win over them. A value for a path whose
	// parent the object lacks is not drawn.
	Values map[string][]any
	// Chains bounds the points of two or three changes made one after
	// another that exploration draws beside the single changes (see
	// explore.InputPoints): 0 for as many as there are single changes, a
	// negative number for none. Changes itself ignores it.
	Chains int
}

// Changes draws the changes of obj's subtree at root (normally "spec") that
// the schema s, obj's from its root, allows; the package comment lists what
// is drawn. They come in schema order (depth first, properties sorted by
// name), one per path, operation and value, each applied to obj and judged
// by validate; after them come at most 10 changes validate refused, marked
// Invalid. A nil validate is a Validator's, judging the changed object as an
// update of obj.
//
// Changes fails when s is nil, when root or a path of r does not parse, or
// when s or obj has nothing at root.
func Changes(s *structuralschema.Structural, obj map[string]any, root string, r Rules, validate func(map[string]any) error) ([]Change, error) {
	if s == nil {
		return nil, errors.New("no schema")
	}
	at, err := parsePath(root)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	g, err := newGenerator(obj, r)
	if err != nil {
		return nil, err
	}
	rs := schemaAt(s, at)
	if rs == nil {
		return nil, fmt.Errorf("the schema has no %s", root)
	}
	v, ok := get(obj, at)
	if !ok {
		return nil, fmt.Errorf("the object has no %s", root)
	}
	if validate == nil {
		val, err := NewValidator(s)
		if err != nil {
			return nil, err
		}
		validate = func(next map[string]any) error { return val.Validate(next, obj) }
	}
	g.walk(rs, v, at, 0, removal{})
	g.leftoverValues()
	return g.judge(validate), nil
}

// schemaAt is the schema of what is at p, nil when s has none.
func schemaAt(s *structuralschema.Structural, p path) *structuralschema.Structural {
	for _, seg := range p {
		if s == nil {
			return nil
		}
		switch {
		case seg.kind == listIndex:
			s = s.Items
		case s.Properties != nil:
			ps, ok := s.Properties[seg.key]
			if !ok {
				return nil
			}
			s = &ps
		case s.AdditionalProperties != nil:
			s = s.AdditionalProperties.Structural
		default:
			return nil
		}
	}
	return s
}

type generator struct {
	obj      map[string]any
	pins     []path
	excludes []path
	values   map[string][]any // by path id
	valueAt  map[string]path
	done     map[string]bool // value paths drawn
	seen     map[string]bool
	out      []Change
}

func newGenerator(obj map[string]any, r Rules) (*generator, error) {
	g := &generator{
		obj:     obj,
		values:  map[string][]any{},
		valueAt: map[string]path{},
		done:    map[string]bool{},
		seen:    map[string]bool{},
	}
	for _, rule := range []struct {
		name  string
		paths []string
		to    *[]path
	}{{"pin", r.Pin, &g.pins}, {"exclude", r.Exclude, &g.excludes}} {
		for _, s := range rule.paths {
			p, err := parsePath(s)
			if err != nil {
				return nil, fmt.Errorf("rules: %s: %w", rule.name, err)
			}
			*rule.to = append(*rule.to, p)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(r.Values)) {
		p, err := parsePath(s)
		if err != nil {
			return nil, fmt.Errorf("rules: values: %w", err)
		}
		id := p.id()
		g.values[id] = append(g.values[id], r.Values[s]...)
		g.valueAt[id] = p
	}
	return g, nil
}

// A removal is how a value is taken from its parent, if it may be.
type removal struct {
	op  Op
	why string
}

// walk draws the changes at and under at, whose value is v and schema s:
// the value's own, then its removal, then its descendants'.
func (g *generator) walk(s *structuralschema.Structural, v any, at path, depth int, rm removal) {
	if depth > maxDepth || g.excluded(at) {
		return
	}
	g.ruleValues(at, v, true)
	opaque := s == nil || s.XPreserveUnknownFields || s.XEmbeddedResource
	if !opaque && !holds(typeOf(s, v), v) {
		return // not what the schema says: left alone
	}
	if !opaque {
		g.own(s, v, at)
	}
	if rm.op != "" {
		g.emit(at, rm.op, nil, rm.why)
	}
	if !opaque {
		g.descend(s, v, at, depth)
	}
}

// own draws the changes of the value at at itself.
func (g *generator) own(s *structuralschema.Structural, v any, at path) {
	t := typeOf(s, v)
	if enum := enumOf(s); len(enum) > 0 && t != "array" && t != "object" {
		for _, e := range enum {
			g.set(at, v, e, "another enum value")
		}
		if out, ok := outsideEnum(v, enum); ok {
			g.set(at, v, out, "outside its enum")
		}
		return
	}
	switch t {
	case "integer":
		g.integer(s, v, at)
	case "number":
		g.number(s, v, at)
	case "string":
		g.text(s, v.(string), at)
	case "boolean":
		g.set(at, v, !v.(bool), "flipped")
	case "array":
		g.list(s, v.([]any), at)
	case "object":
		if s.Properties == nil && s.AdditionalProperties != nil {
			g.mapping(s, v.(map[string]any), at)
		}
	}
}

func (g *generator) integer(s *structuralschema.Structural, v any, at path) {
	cur, _ := asInt(v)
	r := intRangeOf(s)
	if r.hasLo {
		g.set(at, v, r.min(), "its minimum")
	}
	if r.hasHi {
		g.set(at, v, r.max(), "its maximum")
	}
	if r.allows(0) {
		g.set(at, v, int64(0), "zero")
	}
	if x, ok := addInt(cur, r.step); ok && r.allows(x) {
		g.set(at, v, x, "one more")
	}
	if x, ok := addInt(cur, -r.step); ok && r.allows(x) {
		g.set(at, v, x, "one less")
	}
	if x, ok := larger(cur); ok && !r.hasHi && r.allows(x) {
		g.set(at, v, x, "larger, with no maximum")
	}
	if r.hasHi && r.hi < math.MaxInt64 {
		g.set(at, v, r.hi+1, "above its maximum")
	}
	if r.hasLo && r.lo > math.MinInt64 {
		g.set(at, v, r.lo-1, "below its minimum")
	}
}

func (g *generator) number(s *structuralschema.Structural, v any, at path) {
	cur, _ := asFloat(v)
	r := floatRangeOf(s)
	if r.hasLo && !r.exLo {
		g.set(at, v, number(r.lo), "its minimum")
	}
	if r.hasHi && !r.exHi {
		g.set(at, v, number(r.hi), "its maximum")
	}
	for _, c := range []struct {
		x   float64
		why string
	}{{0, "zero"}, {cur + 1, "one more"}, {cur - 1, "one less"}} {
		if r.allows(c.x) {
			g.set(at, v, number(c.x), c.why)
		}
	}
	if x := 2*math.Abs(cur) + 1; !r.hasHi && r.allows(x) {
		g.set(at, v, number(x), "larger, with no maximum")
	}
	if r.hasHi {
		g.set(at, v, number(r.hi+boolTo(!r.exHi)), "above its maximum")
	}
	if r.hasLo {
		g.set(at, v, number(r.lo-boolTo(!r.exLo)), "below its minimum")
	}
}

func boolTo(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (g *generator) text(s *structuralschema.Structural, cur string, at path) {
	r, ok := stringRuleOf(s)
	if !ok {
		return // a format or pattern Changes cannot honour
	}
	if others := r.others(cur); len(others) > 0 {
		why := "another value"
		if r.re != nil {
			why = "another value matching its pattern"
		}
		g.set(at, cur, others[0], why)
	}
	if r.fits("") {
		g.set(at, cur, "", "empty")
	}
	if r.maxLen >= 0 && r.maxLen < maxProbeLength {
		g.set(at, cur, strings.Repeat("x", int(r.maxLen)+1), "longer than its maxLength")
	}
	if r.minLen > 0 && r.minLen <= maxProbeLength {
		g.set(at, cur, strings.Repeat("x", int(r.minLen)-1), "shorter than its minLength")
	}
	if r.re != nil {
		for _, x := range []string{cur + "!", "!", "", " "} {
			if !r.re.MatchString(x) {
				g.set(at, cur, x, "not matching its pattern")
				break
			}
		}
	}
}

func (g *generator) list(s *structuralschema.Structural, l []any, at path) {
	n := len(l)
	if item, ok := newItem(s, l); ok {
		g.emit(at.index(n), OpAddItem, item, "an item added")
	}
	if n >= 1 {
		g.emit(at.index(n-1), OpRemoveItem, nil, "the last item removed")
	}
	if n >= 2 {
		g.emit(at.index(0), OpRemoveItem, nil, "the first item removed")
	}
	if n >= 2 && !palindrome(l) {
		g.emit(at, OpReorder, nil, "reversed")
	}
}

// newItem is an item to add to l: a copy of its last item, with a key made
// unique in a list-type=map and a value of its own in a set; a minimal item
// in an empty list.
func newItem(s *structuralschema.Structural, l []any) (any, bool) {
	if len(l) == 0 {
		return minimal(s.Items, 0)
	}
	item := deepCopy(l[len(l)-1])
	if s.XListType == nil {
		return item, true
	}
	switch *s.XListType {
	case "map":
		return uniqueKeys(s.Items, l, item, s.XListMapKeys)
	case "set":
		taken := map[string]bool{}
		for _, it := range l {
			taken[jsonKey(it)] = true
		}
		for _, alt := range alternatives(s.Items, item) {
			if !taken[jsonKey(alt)] {
				return alt, true
			}
		}
		return nil, false
	}
	return item, true
}

// uniqueKeys changes one of item's keys so that no item of l has its keys.
func uniqueKeys(s *structuralschema.Structural, l []any, item any, keys []string) (any, bool) {
	m, ok := item.(map[string]any)
	if !ok || s == nil || len(keys) == 0 {
		return nil, false
	}
	tuple := func(m map[string]any) string {
		t := make([]any, len(keys))
		for i, k := range keys {
			t[i] = m[k]
		}
		return jsonKey(t)
	}
	taken := map[string]bool{}
	for _, it := range l {
		if im, ok := it.(map[string]any); ok {
			taken[tuple(im)] = true
		}
	}
	for _, k := range keys {
		ks, ok := s.Properties[k]
		if !ok {
			continue
		}
		cur, present := m[k]
		for _, alt := range alternatives(&ks, cur) {
			m[k] = alt
			if !taken[tuple(m)] {
				return m, true
			}
		}
		if present {
			m[k] = cur
		} else {
			delete(m, k)
		}
	}
	return nil, false
}

// palindrome reports whether reversing l leaves it as it is.
func palindrome(l []any) bool {
	for i := range len(l) / 2 {
		if !equal(l[i], l[len(l)-1-i]) {
			return false
		}
	}
	return true
}

func (g *generator) mapping(s *structuralschema.Structural, m map[string]any, at path) {
	key := addedKey
	for i := 2; hasKey(m, key); i++ {
		key = fmt.Sprintf("%s-%d", addedKey, i)
	}
	var (
		value any
		ok    bool
	)
	if keys := slices.Sorted(maps.Keys(m)); len(keys) > 0 {
		value, ok = deepCopy(m[keys[0]]), true
	} else {
		value, ok = minimal(s.AdditionalProperties.Structural, 0)
	}
	if ok {
		g.emit(at.key(key), OpAddKey, value, "a key added")
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// descend draws the changes under at: the properties of an object, the
// first and last items of a list, the first and last entries of a map.
func (g *generator) descend(s *structuralschema.Structural, v any, at path, depth int) {
	switch v := v.(type) {
	case map[string]any:
		if s.Properties == nil && s.AdditionalProperties != nil {
			keys := slices.Sorted(maps.Keys(v))
			for i, k := range keys {
				if i < headItems || i == len(keys)-1 {
					g.walk(s.AdditionalProperties.Structural, v[k], at.key(k), depth+1, removal{OpRemoveKey, "a key removed"})
				}
			}
			return
		}
		g.object(s, v, at, depth)
	case []any:
		for i, item := range v {
			if i < headItems || i == len(v)-1 {
				g.walk(s.Items, item, at.index(i), depth+1, removal{})
			}
		}
	}
}

func (g *generator) object(s *structuralschema.Structural, m map[string]any, at path, depth int) {
	var required []string
	if s.ValueValidation != nil {
		required = s.ValueValidation.Required
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		ps := s.Properties[name]
		child := at.field(name)
		isRequired := slices.Contains(required, name)
		if v, ok := m[name]; ok {
			rm := removal{OpRemove, "removed (optional)"}
			if isRequired {
				rm.why = "removed (required)"
			}
			g.walk(&ps, v, child, depth+1, rm)
			continue
		}
		if depth+1 > maxDepth || g.excluded(child) {
			continue
		}
		g.ruleValues(child, nil, false)
		if ps.Default.Object != nil {
			g.emit(child, OpSet, deepCopy(ps.Default.Object), "added (its default)")
		} else if v, ok := minimal(&ps, 0); ok {
			g.emit(child, OpSet, v, "added (minimal)")
		}
	}
}

// ruleValues draws the values the rules give for at, once.
func (g *generator) ruleValues(at path, cur any, present bool) {
	id := at.id()
	values, ok := g.values[id]
	if !ok || g.done[id] {
		return
	}
	g.done[id] = true
	for _, v := range values {
		if !present || !equal(cur, v) {
			g.emit(at, OpSet, deepCopy(v), "from the rules")
		}
	}
}

// leftoverValues draws the rules' values for paths the walk did not reach:
// past a cap, in an opaque value, or outside the root.
func (g *generator) leftoverValues() {
	for _, id := range slices.Sorted(maps.Keys(g.values)) {
		p := g.valueAt[id]
		if g.done[id] || g.excluded(p) {
			continue
		}
		if _, ok := get(g.obj, p[:len(p)-1]); !ok {
			continue
		}
		cur, present := get(g.obj, p)
		g.ruleValues(p, cur, present)
	}
}

func (g *generator) excluded(p path) bool {
	for _, q := range g.pins {
		if p.within(q) {
			return true
		}
	}
	for _, q := range g.excludes {
		if p.within(q) {
			return true
		}
	}
	return false
}

// set draws setting the value at at, cur, to v, unless it is cur already.
func (g *generator) set(at path, cur, v any, why string) {
	if !equal(cur, v) {
		g.emit(at, OpSet, v, why)
	}
}

// emit draws a change, unless the rules exclude its path, an equal change
// was drawn already, or enough were.
func (g *generator) emit(at path, op Op, v any, why string) {
	if len(g.out) >= maxCandidates || g.excluded(at) {
		return
	}
	key := at.id() + " " + string(op) + " " + jsonKey(v)
	if g.seen[key] {
		return
	}
	g.seen[key] = true
	g.out = append(g.out, Change{Path: at.String(), Op: op, Value: v, Why: why})
}

// judge applies each drawn change to the object and sorts it by validate's
// verdict, dropping those that alter a pinned value.
func (g *generator) judge(validate func(map[string]any) error) []Change {
	var valid, invalid []Change
	for _, c := range g.out {
		next, err := Apply(g.obj, c)
		if err != nil || g.disturbsPin(next) {
			continue
		}
		if validate(next) == nil {
			valid = append(valid, c)
		} else if len(invalid) < maxInvalid {
			c.Invalid = true
			invalid = append(invalid, c)
		}
	}
	return append(valid, invalid...)
}

func (g *generator) disturbsPin(next map[string]any) bool {
	for _, p := range g.pins {
		before, was := get(g.obj, p)
		after, is := get(next, p)
		if was != is || was && !equal(before, after) {
			return true
		}
	}
	return false
}
