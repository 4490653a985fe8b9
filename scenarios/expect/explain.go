package expect

import (
	"encoding/json"
	"fmt"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
)

// maxExplained bounds how many fields Explain names, and maxValue how
// much of each value it shows.
const (
	maxExplained = 8
	maxValue     = 80
)

// Explain names the fields of object, oldObject and objects that e read,
// with the values it read, as "object.spec.replicas = 3,
// object.status.readyReplicas = 1": what a rule found false was false of.
// Fields read inside a comprehension (all, exists) are left out, their
// value being one iteration's. It is "" when there is nothing to name.
func (e *Expression) Explain(object, oldObject map[string]any, objects map[string]any) string {
	prg, err := e.tracing()
	if err != nil {
		return ""
	}
	_, det, _ := prg.Eval(&activation{object: object, oldObject: oldObject, objects: objects})
	if det == nil || det.State() == nil {
		return ""
	}
	root := celast.NavigateAST(e.ast.NativeRep())
	var out []string
	seen := map[string]bool{}
	for _, n := range celast.MatchDescendants(root, func(n celast.NavigableExpr) bool { return n.Kind() == celast.SelectKind }) {
		if outer, ok := n.Parent(); ok && outer.Kind() == celast.SelectKind {
			continue // a longer path holds this one
		}
		if inComprehension(n) {
			continue
		}
		path, ok := pathOf(n)
		if !ok || seen[path] {
			continue
		}
		seen[path] = true
		v, ok := det.State().Value(n.ID())
		if !ok {
			continue
		}
		out = append(out, path+" = "+show(v))
		if len(out) == maxExplained {
			break
		}
	}
	return strings.Join(out, ", ")
}

// inComprehension: n lies within a comprehension's loop.
func inComprehension(n celast.NavigableExpr) bool {
	for p, ok := n.Parent(); ok; p, ok = p.Parent() {
		if p.Kind() == celast.ComprehensionKind {
			return true
		}
	}
	return false
}

// pathOf is a select chain from object, oldObject or objects as written:
// object.spec.replicas.
func pathOf(n celast.Expr) (string, bool) {
	var parts []string
	for n.Kind() == celast.SelectKind {
		s := n.AsSelect()
		if s.IsTestOnly() {
			return "", false // has(...)
		}
		parts = append(parts, s.FieldName())
		n = s.Operand()
	}
	if n.Kind() != celast.IdentKind {
		return "", false
	}
	switch id := n.AsIdent(); id {
	case "object", "oldObject", "objects":
		parts = append(parts, id)
	default:
		return "", false
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "."), true
}

// show is v as JSON, cut to maxValue.
func show(v ref.Val) string {
	native := v.Value()
	b, err := json.Marshal(native)
	s := string(b)
	if err != nil {
		s = fmt.Sprint(native)
	}
	if len(s) > maxValue {
		s = s[:maxValue] + "..."
	}
	return s
}
