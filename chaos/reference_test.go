package chaos

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/converge-lab/converge/internal/golden"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the generated page docs/reference/faults.md")

// The fault table is the registry's: a fault added, renamed, described
// anew or made available elsewhere without the page following fails here
// (go test ./chaos -run TestReferenceListsTheFaults -update rewrites it).
func TestReferenceListsTheFaults(t *testing.T) {
	path := filepath.Join("..", "docs", "reference", "faults.md")
	want, err := faultsReference()
	require.NoError(t, err)
	golden.Check(t, path, want, *update, "go test ./chaos -run TestReferenceListsTheFaults -update")
}

// faultKinds name what a fault acts on, with what the page says of each.
var faultKinds = []struct{ name, does string }{
	{"request", "Answers a matching request of the controller in place of the server, or holds it before it goes on."},
	{"watch", "Acts on the frames of the controller's watch streams that carry an object the target selects."},
	{"instance", "Fires right after a matching request succeeds, and ends the controller instance whose client sent it; the run starts a new instance `controller.restartAfter` after it stops."},
	{"view", "Answers the controller's lists (and holds its watch events) from an older state than the current one, as a lagging API server replica or cache would; its writes still go to the current state."},
	{"control plane", "Acts on the backend's API server or storage: with a target, right after a matching request succeeds; without one, on a schedule from the start of the run (`when.after`, repeated every `when.every` up to `when.count` times, before `when.until`)."},
}

// kindOf is the name of what f acts on (see faultKinds), "" for none of
// them.
func kindOf(f Fault) string {
	switch f.(type) {
	case controlPlaneFault:
		return "control plane"
	case requestFault:
		return "request"
	case watchFault:
		return "watch"
	case interface{ endsInstance() }:
		return "instance"
	case staleView:
		return "view"
	}
	return ""
}

// param is a parameter of a Spec (other than its target and when) that
// a fault reads.
type param struct {
	key      string // as a file writes it
	field    []int  // its index in Spec
	required bool
}

// paramsOf lists the parameters the fault of base reads: those another
// value of which builds another fault or is refused. One is required when
// the fault is not built without it. base holds a value of each that every
// fault accepts.
func paramsOf(base Spec) ([]param, error) {
	build := registry[base.Fault]
	want, err := build(base)
	if err != nil {
		return nil, err
	}
	var out []param
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Spec]()) {
		if !isParam(f) {
			continue
		}
		if f.Type.Kind() != reflect.Int && f.Type.Kind() != reflect.Int64 {
			return nil, fmt.Errorf("Spec.%s: the generator tries other values of integer parameters only", f.Name)
		}
		other, zero := base, base
		v := reflect.ValueOf(&other).Elem().FieldByIndex(f.Index)
		v.SetInt(v.Int() + 1)
		reflect.ValueOf(&zero).Elem().FieldByIndex(f.Index).SetZero()
		if got, err := build(other); err == nil && reflect.DeepEqual(got, want) {
			continue
		}
		_, err := build(zero)
		out = append(out, param{key: jsonKey(f), field: f.Index, required: err != nil})
	}
	return out, nil
}

// isParam says whether a field of Spec is a parameter, which some faults
// read, rather than what every fault has (its name, target and when, the
// profile it came from and the controller it is bound to).
func isParam(f reflect.StructField) bool {
	return f.Name != "Fault" && f.Name != "Target" && f.Name != "When" && f.Name != "Profile" && f.Name != "Controller"
}

// jsonKey is the key a file writes field f under.
func jsonKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return key
}

// pkgDocs are the doc comments of this package's source.
type pkgDocs struct {
	doc   *doc.Package
	files []*ast.File
	funcs map[string]string // doc comments of functions, constructors included
}

// readDocs parses this package's non-test files.
func readDocs() (*pkgDocs, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	p := &pkgDocs{funcs: map[string]string{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	if p.doc, err = doc.NewFromFiles(fset, p.files, "github.com/converge-lab/converge/chaos", doc.AllDecls|doc.PreserveAST); err != nil {
		return nil, err
	}
	for _, f := range p.doc.Funcs {
		p.funcs[f.Name] = f.Doc
	}
	for _, t := range p.doc.Types {
		for _, f := range t.Funcs {
			p.funcs[f.Name] = f.Doc
		}
	}
	return p, nil
}

// constructor is the function a registry entry builds its fault with,
// and the keys of the Spec fields it passes, by the name of the
// function's parameter that takes each.
type constructor struct {
	name string
	keys map[string]string
}

// constructors maps each fault name to its constructor, read from the
// registry's source.
func (p *pkgDocs) constructors() (map[string]constructor, error) {
	consts := map[string]string{}
	params := map[string][]string{}
	var registry *ast.CompositeLit
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, v := range n.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[n.Names[i].Name], _ = strconv.Unquote(lit.Value)
					}
					if n.Names[i].Name == "registry" {
						registry = v.(*ast.CompositeLit)
					}
				}
			case *ast.FuncDecl:
				if n.Recv != nil {
					return true
				}
				for _, field := range n.Type.Params.List {
					for _, name := range field.Names {
						params[n.Name.Name] = append(params[n.Name.Name], name.Name)
					}
				}
			}
			return true
		})
	}
	if registry == nil {
		return nil, fmt.Errorf("no var registry in package chaos")
	}
	fields := map[string]string{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Spec]()) {
		if isParam(f) {
			fields[f.Name] = jsonKey(f)
		}
	}
	out := map[string]constructor{}
	for _, elt := range registry.Elts {
		kv := elt.(*ast.KeyValueExpr)
		name := consts[kv.Key.(*ast.Ident).Name]
		ast.Inspect(kv.Value, func(n ast.Node) bool {
			ret, ok := n.(*ast.ReturnStmt)
			if !ok || out[name].name != "" {
				return true
			}
			if call, ok := ret.Results[0].(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && id.IsExported() {
					c := constructor{id.Name, map[string]string{}}
					for i, arg := range call.Args {
						if sel, ok := arg.(*ast.SelectorExpr); ok && i < len(params[id.Name]) && fields[sel.Sel.Name] != "" {
							c.keys[params[id.Name][i]] = fields[sel.Sel.Name]
						}
					}
					out[name] = c
				}
			}
			return true
		})
	}
	return out, nil
}

// keysIn writes the names of the constructor's parameters in md, its doc
// comment as Markdown, as the keys of a file.
func (c constructor) keysIn(md string) string {
	text := md
	for _, param := range slices.Sorted(maps.Keys(c.keys)) {
		text = regexp.MustCompile(`\b`+param+`\b`).ReplaceAllString(text, "`"+c.keys[param]+"`")
	}
	return text
}

// typeDoc is the doc comment of type name, and those of its fields by
// name.
func (p *pkgDocs) typeDoc(name string) (string, map[string]string) {
	for _, t := range p.doc.Types {
		if t.Name != name {
			continue
		}
		members := map[string]string{}
		if st, ok := t.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType); ok {
			for _, f := range st.Fields.List {
				for _, n := range f.Names {
					members[n.Name] = f.Doc.Text()
				}
			}
		}
		return t.Doc, members
	}
	return "", nil
}

// layer is a Layer with its doc comment.
type layer struct {
	value Layer
	doc   string
}

// layers are the Layer constants, in their source order.
func (p *pkgDocs) layers() []layer {
	var out []layer
	for _, t := range p.doc.Types {
		if t.Name != "Layer" {
			continue
		}
		for _, c := range t.Consts {
			for _, s := range c.Decl.Specs {
				vs := s.(*ast.ValueSpec)
				v, _ := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
				out = append(out, layer{Layer(v), strings.TrimPrefix(vs.Doc.Text(), vs.Names[0].Name+": ")})
			}
		}
	}
	return out
}

// faultsReference generates docs/reference/faults.md from the registry,
// from what each fault says of itself (Available, PlaneOf) and from the
// doc comments of this package.
func faultsReference() (string, error) {
	p, err := readDocs()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Fault reference\n\n" +
		"<!-- Generated from the fault registry and the doc comments of package chaos by TestReferenceListsTheFaults " +
		"(go test ./chaos -run TestReferenceListsTheFaults -update). Do not edit. -->\n\n" +
		"Every fault a scenario can name (`fault:` in a [chaos.Spec](scenario.md#chaosspec)). Each takes a `target` " +
		"(verbs, resource, namespace, name; empty fields match anything) and a `when` ([chaos.When](scenario.md#chaoswhen)); " +
		"the parameters column lists what else it reads.\n\n" +
		"What a fault acts on:\n\n")
	for _, k := range faultKinds {
		fmt.Fprintf(&b, "- **%s**: %s\n", k.name, k.does)
	}
	b.WriteString("\nWhere a fault applies: the layers it means what it says on, and whether it needs a control plane.\n\n")
	for _, l := range p.layers() {
		fmt.Fprintf(&b, "- `%s`: %s\n", l.value, markdownLine(p.doc, l.doc))
	}
	cpDoc, _ := p.typeDoc("ControlPlane")
	fmt.Fprintf(&b, "- control plane: %s\n\n", markdownLine(p.doc, cpDoc))
	fmt.Fprintf(&b, "A controller that uses the fake clientset a backend hands it meets the faults on that clientset's layer; "+
		"every other one (on a real API server, on the in-memory API's REST door through a `rest.Config`, or a binary "+
		"behind the fault proxy) meets them on the `%s` layer. A run whose fault does not apply where it would be "+
		"injected ends as an error before the controller starts.\n\n", HTTP)
	b.WriteString("| fault | acts on | what it does | applies on | parameters |\n| --- | --- | --- | --- | --- |\n")
	ctors, err := p.constructors()
	if err != nil {
		return "", err
	}
	var details strings.Builder
	for _, name := range Names() {
		row, detail, err := p.fault(name, ctors[name])
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		b.WriteString(row)
		details.WriteString(detail)
	}
	b.WriteString("\n## Parameters\n\n")
	_, fields := p.typeDoc("Spec")
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Spec]()) {
		if isParam(f) {
			fmt.Fprintf(&b, "- `%s`: %s\n", jsonKey(f), markdownLine(p.doc, fields[f.Name]))
		}
	}
	b.WriteString("\n## Each fault\n\n")
	b.WriteString(details.String())
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// fault is the table row of the fault named, and its section: its
// constructor's doc comment, where it does not apply and why, and what it
// does to the control plane.
func (p *pkgDocs) fault(name string, ctor constructor) (row, detail string, err error) {
	// A value of each parameter that every fault accepts.
	spec := Spec{Fault: name, RetryAfter: 1, Delay: time.Second}
	f, err := registry[name](spec)
	if err != nil {
		return "", "", err
	}
	text := trimName(p.funcs[ctor.name], ctor.name)
	if ctor.name == "" || text == "" {
		return "", "", fmt.Errorf("no constructor with a doc comment found in the registry's source")
	}
	if kindOf(f) == "" {
		return "", "", fmt.Errorf("acts on none of the kinds in faultKinds")
	}
	params, err := paramsOf(spec)
	if err != nil {
		return "", "", err
	}
	var where, notes, ps []string
	for _, l := range p.layers() {
		if err := f.Available(l.value); err != nil {
			notes = append(notes, fmt.Sprintf("Not on the `%s` layer: %s.", l.value, err))
		} else {
			where = append(where, "`"+string(l.value)+"`")
		}
		for _, pm := range params {
			without := spec
			reflect.ValueOf(&without).Elem().FieldByIndex(pm.field).SetZero()
			if g, err := registry[name](without); err == nil && g.Available(l.value) == nil && f.Available(l.value) != nil {
				where = append(where, fmt.Sprintf("`%s` without `%s`", l.value, pm.key))
				notes = append(notes, fmt.Sprintf("Without `%s`, on the `%s` layer too.", pm.key, l.value))
			}
		}
	}
	if plane, ok := PlaneOf(f); ok {
		where = append(where, "needs a control plane")
		_, fields := p.typeDoc("Plane")
		v := reflect.ValueOf(plane)
		for i := range v.NumField() {
			if field := v.Type().Field(i).Name; v.Field(i).Bool() {
				notes = append(notes, "Control plane: "+markdownLine(p.doc, trimName(fields[field], field)))
			}
		}
	}
	for _, pm := range params {
		if pm.required {
			ps = append(ps, "`"+pm.key+"` (required)")
		} else {
			ps = append(ps, "`"+pm.key+"`")
		}
	}
	if len(ps) == 0 {
		ps = []string{"none"}
	}
	row = fmt.Sprintf("| [`%s`](#%s) | %s | %s | %s | %s |\n", name, name, kindOf(f),
		strings.ReplaceAll(ctor.keysIn(markdownLine(p.doc, p.doc.Synopsis(text))), "|", `\|`),
		strings.Join(where, ", "), strings.Join(ps, ", "))
	detail = fmt.Sprintf("### %s\n\n%s\n", name, ctor.keysIn(markdown(p.doc, text)))
	for _, n := range notes {
		detail += n + "\n\n"
	}
	return row, detail, nil
}

// trimName drops the Go name a doc comment starts with ("Conflict
// answers" reads "Answers"), and the colon after it if any.
func trimName(text, name string) string {
	rest, ok := strings.CutPrefix(text, name)
	if !ok || !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, ":") {
		return text
	}
	rest = strings.TrimPrefix(rest, ":")
	return capitalize(strings.TrimLeft(rest, " "))
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// markdown renders a doc comment as Markdown.
func markdown(p *doc.Package, text string) string {
	return string(p.Printer().Markdown(p.Parser().Parse(text)))
}

// markdownLine renders a doc comment as Markdown on one line.
func markdownLine(p *doc.Package, text string) string {
	return strings.Join(strings.Fields(markdown(p, text)), " ")
}
