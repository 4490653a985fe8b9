package expect

import (
	"maps"
	"math"
	"slices"
)

// MaxMismatches bounds what Match returns: a report needs the first few,
// and a goal that fails everywhere should not print a whole object.
const MaxMismatches = 20

// maxDepth bounds how deeply Match descends; Kubernetes objects are far
// shallower.
const maxDepth = 256

// Reasons a Mismatch gives.
const (
	// ReasonMissing: actual has no value at Path.
	ReasonMissing = "missing"
	// ReasonDiffers: the value at Path is not the expected one (or not of
	// its kind: a map, a list, a number...).
	ReasonDiffers = "differs"
	// ReasonNoMatch: no element of the actual list matches the expected
	// element at Path.
	ReasonNoMatch = "no element matches"
	// ReasonTaken: elements of the actual list match the expected element
	// at Path, but each of them is needed by another expected element.
	ReasonTaken = "matching elements taken"
	// ReasonTooDeep: the values nest deeper than Match descends.
	ReasonTooDeep = "too deep"
)

// Mismatch is one way an actual object differs from an expected partial
// object.
type Mismatch struct {
	// Path locates the difference (list indexes are those of expected).
	Path string
	// Expected is the expected value at Path, and Actual the actual one
	// (nil when missing; the actual list for ReasonNoMatch and
	// ReasonTaken).
	Expected, Actual any
	// Reason is one of the Reason constants.
	Reason string
}

func (m Mismatch) String() string {
	var s string
	switch m.Reason {
	case ReasonMissing:
		s = "missing"
	case ReasonNoMatch:
		s = "no element matches " + formatValue(m.Expected)
	case ReasonTaken:
		s = "every element matching " + formatValue(m.Expected) + " is taken by another expected element"
	case ReasonTooDeep:
		s = "nested too deeply to compare"
	default:
		s = "expected " + formatValue(m.Expected) + ", got " + formatValue(m.Actual)
	}
	if m.Path == "" {
		return s
	}
	return m.Path + ": " + s
}

// Match reports every way actual differs from expected, a partial object,
// by the rules in the package doc: at most MaxMismatches of them, in path
// order (map keys sorted, list elements by index). Empty result = match.
func Match(expected, actual any) []Mismatch {
	var m matcher
	m.diff(expected, actual, true, 0)
	return m.out
}

// matcher walks expected and actual together, naming each difference.
type matcher struct {
	path []Segment
	out  []Mismatch
}

func (m *matcher) full() bool { return len(m.out) >= MaxMismatches }

func (m *matcher) report(exp, act any, reason string) {
	if !m.full() {
		m.out = append(m.out, Mismatch{Path: Path(m.path).String(), Expected: exp, Actual: act, Reason: reason})
	}
}

// diff compares exp with act, which is there at all only when present.
// compile and pattern.matches follow the same rules, without naming
// differences.
func (m *matcher) diff(exp, act any, present bool, depth int) {
	switch {
	case exp == nil:
		if present && act != nil {
			m.report(exp, act, ReasonDiffers)
		}
		return
	case !present:
		m.report(exp, nil, ReasonMissing)
		return
	case depth > maxDepth:
		m.report(exp, act, ReasonTooDeep)
		return
	}
	if em, ok := asMap(exp); ok {
		am, ok := asMap(act)
		if !ok {
			m.report(exp, act, ReasonDiffers)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(em)) {
			av, ok := am[k]
			m.path = append(m.path, Segment{Key: k, Index: -1})
			m.diff(em[k], av, ok, depth+1)
			m.path = m.path[:len(m.path)-1]
			if m.full() {
				return
			}
		}
		return
	}
	if el, ok := asList(exp); ok {
		al, ok := asList(act)
		if !ok {
			m.report(exp, act, ReasonDiffers)
			return
		}
		m.diffList(el, al, act, depth)
		return
	}
	if !scalarEqual(exp, act) {
		m.report(exp, act, ReasonDiffers)
	}
}

// diffList pairs each expected element with a distinct actual one, and
// reports the expected elements left without a partner.
func (m *matcher) diffList(exp, act []any, actual any, depth int) {
	pats := make([]*pattern, len(exp))
	for i, e := range exp {
		pats[i] = compile(e, depth+1)
	}
	adj := candidates(pats, act, false)
	pair := maxMatching(adj, len(act))
	for i, j := range pair {
		if j >= 0 {
			continue
		}
		reason := ReasonTaken
		if len(adj[i]) == 0 {
			reason = ReasonNoMatch
		}
		m.path = append(m.path, Segment{Index: i})
		m.report(exp[i], actual, reason)
		m.path = m.path[:len(m.path)-1]
		if m.full() {
			return
		}
	}
}

// candidates returns, for each expected element, the actual elements it
// matches: each pair is compared once. It keeps at most len(pats) per
// element, which bounds memory and loses nothing: an element with that
// many can always be given one the others left free. With stopEarly, it
// returns nil as soon as an element has none.
func candidates(pats []*pattern, act []any, stopEarly bool) [][]int32 {
	adj := make([][]int32, len(pats))
	for i, p := range pats {
		for j, a := range act {
			if p.matches(a, true) {
				adj[i] = append(adj[i], int32(j))
				if len(adj[i]) == len(pats) {
					break
				}
			}
		}
		if stopEarly && len(adj[i]) == 0 {
			return nil
		}
	}
	return adj
}

// pattern is an expected value made ready to be matched against many
// actual ones, as list elements are: maps become slices, so that matching
// does not iterate a Go map per candidate.
type pattern struct {
	kind patternKind
	// keys and vals of a map.
	keys []string
	vals []*pattern
	// elems of a list.
	elems []*pattern
	// scalar value.
	value any
}

type patternKind uint8

const (
	patternNull patternKind = iota
	patternMap
	patternList
	patternScalar
	patternTooDeep
)

func compile(exp any, depth int) *pattern {
	switch {
	case exp == nil:
		return &pattern{kind: patternNull}
	case depth > maxDepth:
		return &pattern{kind: patternTooDeep}
	}
	if em, ok := asMap(exp); ok {
		p := &pattern{kind: patternMap, keys: make([]string, 0, len(em)), vals: make([]*pattern, 0, len(em))}
		for k, v := range em {
			p.keys = append(p.keys, k)
			p.vals = append(p.vals, compile(v, depth+1))
		}
		return p
	}
	if el, ok := asList(exp); ok {
		p := &pattern{kind: patternList, elems: make([]*pattern, len(el))}
		for i, e := range el {
			p.elems[i] = compile(e, depth+1)
		}
		return p
	}
	return &pattern{kind: patternScalar, value: exp}
}

// matches reports whether act (there at all only when present) matches p,
// by the rules of matcher.diff.
func (p *pattern) matches(act any, present bool) bool {
	if p.kind == patternNull {
		return !present || act == nil
	}
	if !present {
		return false
	}
	switch p.kind {
	case patternMap:
		am, ok := asMap(act)
		if !ok {
			return false
		}
		for i, k := range p.keys {
			av, ok := am[k]
			if !p.vals[i].matches(av, ok) {
				return false
			}
		}
		return true
	case patternList:
		al, ok := asList(act)
		if !ok || len(p.elems) > len(al) {
			return false
		}
		if len(p.elems) == 0 {
			return true
		}
		adj := candidates(p.elems, al, true)
		if adj == nil {
			return false
		}
		return !slices.Contains(maxMatching(adj, len(al)), -1)
	case patternScalar:
		return scalarEqual(p.value, act)
	}
	return false
}

// maxMatching returns a maximum matching of the bipartite graph adj
// (Hopcroft-Karp): pair[i] is the right vertex matched to left vertex i,
// or -1. It runs in O(E·√V).
func maxMatching(adj [][]int32, right int) []int32 {
	const inf = math.MaxInt32
	pair := make([]int32, len(adj))
	owner := make([]int32, right)
	for i := range pair {
		pair[i] = -1
	}
	for j := range owner {
		owner[j] = -1
	}
	// Greedy start: most real lists need nothing more.
	for i, js := range adj {
		for _, j := range js {
			if owner[j] < 0 {
				pair[i], owner[j] = j, int32(i)
				break
			}
		}
	}
	dist := make([]int32, len(adj))
	queue := make([]int32, 0, len(adj))
	var augment func(i int32) bool
	augment = func(i int32) bool {
		for _, j := range adj[i] {
			k := owner[j]
			if k < 0 || dist[k] == dist[i]+1 && augment(k) {
				pair[i], owner[j] = j, i
				return true
			}
		}
		dist[i] = inf
		return false
	}
	for {
		// Layer the left vertices by alternating distance from the free
		// ones; stop when no free right vertex is reachable.
		queue = queue[:0]
		for i := range adj {
			if pair[i] < 0 && len(adj[i]) > 0 {
				dist[i] = 0
				queue = append(queue, int32(i))
			} else {
				dist[i] = inf
			}
		}
		found := false
		for q := 0; q < len(queue); q++ {
			i := queue[q]
			for _, j := range adj[i] {
				k := owner[j]
				if k < 0 {
					found = true
				} else if dist[k] == inf {
					dist[k] = dist[i] + 1
					queue = append(queue, k)
				}
			}
		}
		if !found {
			return pair
		}
		for i := range adj {
			if pair[i] < 0 && dist[i] == 0 {
				augment(int32(i))
			}
		}
	}
}
