package scenarios

import (
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-lab/converge/internal/bounded"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/expect"
)

// kindSchemas are the schemas of the kinds a scenario's rules read: its
// own CRDs' (the objects it creates), then those client-go knows. A kind
// of neither (its CRD comes from elsewhere) has none, and is not checked.
type kindSchemas struct {
	s    *Scenario
	crds map[schema.GroupVersionKind]*expect.Schema
}

// kindSchemas reads the schemas of s's CRDs, once per validation.
func (s *Scenario) kindSchemas() kindSchemas {
	out := kindSchemas{s: s, crds: map[schema.GroupVersionKind]*expect.Schema{}}
	crdKind := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	for _, o := range s.Objects {
		if o.Manifest == nil || o.Manifest["apiVersion"] != crdKind.GroupVersion().String() || o.Manifest["kind"] != crdKind.Kind {
			continue
		}
		for gvk, sch := range crdSchemas(o.Manifest) {
			out.crds[gvk] = sch
		}
	}
	return out
}

// crdSchemasSeen are the schemas of the CRD manifests read, by their
// JSON: each run validates its scenario again, and every run of an
// exploration or a campaign carries the same CRDs, whose conversion was
// most of a validation.
var crdSchemasSeen = bounded.Map[string, map[schema.GroupVersionKind]*expect.Schema]{Limit: 256}

// crdSchemas are the schemas of the CRD manifest (expect.CRDSchemas):
// none when it is no CRD, which is refused when it is installed. The map
// is shared: not to be changed.
func crdSchemas(manifest map[string]any) map[schema.GroupVersionKind]*expect.Schema {
	key, err := json.Marshal(manifest)
	if err == nil {
		if out, ok := crdSchemasSeen.Get(string(key)); ok {
			return out
		}
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(manifest), &crd); err != nil {
		return nil
	}
	out := expect.CRDSchemas(&crd)
	if key != nil {
		crdSchemasSeen.Put(string(key), out)
	}
	return out
}

// schema returns the schema of a kind, or nil.
func (k kindSchemas) schema(gvk schema.GroupVersionKind) *expect.Schema {
	if s, ok := k.crds[gvk]; ok {
		return s
	}
	return expect.BuiltinSchema(gvk)
}

// of returns the schema of the kind sel selects, or nil.
func (k kindSchemas) of(sel Selector) *expect.Schema {
	gv, err := schema.ParseGroupVersion(sel.APIVersion)
	if err != nil {
		return nil
	}
	return k.schema(gv.WithKind(sel.Kind))
}

// types returns what the variables of rule, judged of objects sel
// selects, hold. objects.Kind is typed when the scenario names one kind
// of that name: objects are keyed by kind alone.
func (k kindSchemas) types(sel Selector, rule string) expect.Types {
	t := expect.Types{Object: k.of(sel)}
	for _, kind := range check.KindsAcross(rule) {
		var named []schema.GroupVersionKind
		for _, gvk := range k.s.kinds() {
			if gvk.Kind == kind {
				named = append(named, gvk)
			}
		}
		if len(named) == 1 {
			if t.Kinds == nil {
				t.Kinds = map[string]*expect.Schema{}
			}
			t.Kinds[kind] = k.schema(named[0])
		}
	}
	return t
}

// checkFields reports the fields expr, compiled from what is at path,
// reads that no object it judges can hold; what says which expression it
// is (invariant "x": rule).
func (k kindSchemas) checkFields(expr *expect.Expression, sel Selector, path, what string, bad func(valueError)) {
	errs := expr.CheckFields(k.types(sel, expr.Source))
	if len(errs) == 0 {
		return
	}
	// The first only, so that a scenario's errors stay a page long.
	msg := fmt.Sprintf("%s %s", what, errs[0])
	if len(errs) > 1 {
		msg += fmt.Sprintf("; and %d more such fields", len(errs)-1)
	}
	bad(valueError{path: path, msg: msg, line: errs[0].Line, col: errs[0].Column})
}

// valueError is a validation error at a place (line and col, 1-based) in
// the string value at a field path: an expression. Parse turns it into a
// file line and column.
type valueError struct {
	path      string
	msg       string
	line, col int
}

func (e valueError) Error() string {
	return fmt.Sprintf("%s: line %d, column %d: %s", e.path, e.line, e.col, e.msg)
}

// valuePosition returns the line and column in the file (data) of the
// character at line and col (1-based) of n's string value: its text is
// matched against the file from where n starts, skipping what the value
// does not hold (indentation, quotes, a block scalar's header, escapes),
// so folded, literal, quoted and plain scalars, and JSON, all place it. When the text cannot be
// matched (an escape the file spells otherwise), it is n's own position.
func valuePosition(data []byte, n *yaml.Node, line, col int) (int, int) {
	value := []rune(n.Value)
	at, l, c := 0, 1, 1 // the offset in value of line:col
	for at < len(value) && (l < line || (l == line && c < col)) {
		if value[at] == '\n' {
			l, c = l+1, 1
		} else {
			c++
		}
		at++
	}
	src := []rune(string(data))
	// p: the offset in src of n's first character.
	p, fl, fc := 0, 1, 1
	for p < len(src) && (fl < n.Line || fc < n.Column) {
		if src[p] == '\n' {
			if fl == n.Line {
				break
			}
			fl, fc = fl+1, 1
		} else {
			fc++
		}
		p++
	}
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		for p < len(src) && src[p] != '\n' {
			p++
		}
	case n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0:
		p++
	}
	quoted := n.Style&yaml.DoubleQuotedStyle != 0
	for i := 0; i <= at && i < len(value); i++ {
		width := 0
		for width == 0 {
			switch {
			case p >= len(src):
				return n.Line, n.Column
			case quoted && src[p] == '\\' && p+1 < len(src):
				if unescape(src[p+1]) == value[i] {
					width = 2
				} else {
					p += 2
				}
			case src[p] == value[i]:
				width = 1
			default:
				p++
			}
		}
		if i < at {
			p += width
		}
	}
	l, c = 1, 1
	for _, r := range src[:p] {
		if r == '\n' {
			l, c = l+1, 1
		} else {
			c++
		}
	}
	return l, c
}

// unescape returns the character a double-quoted escape \c stands for
// (the one-character escapes of YAML and JSON), or c.
func unescape(c rune) rune {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case '0':
		return 0
	}
	return c
}
