package scenarios_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/converge-lab/converge/internal/golden"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the generated page docs/reference/scenario.md")

// The scenario-file reference is the doc comments of Scenario and of the
// types its fields reach: a field added, renamed or described anew
// without the page following fails here (go test ./scenarios -run
// TestReferenceDescribesTheScenarioFile -update rewrites it).
func TestReferenceDescribesTheScenarioFile(t *testing.T) {
	path := filepath.Join("..", "docs", "reference", "scenario.md")
	want, err := scenarioReference()
	require.NoError(t, err)
	golden.Check(t, path, want, *update, "go test ./scenarios -run TestReferenceDescribesTheScenarioFile -update")
}

// module is this module's path: imports under it are read from source,
// relative to this package's folder.
const module = "github.com/converge-lab/converge/"

// externalTypes are the types from outside the module a scenario file
// may hold, as a file writes them.
var externalTypes = map[string]string{"time.Duration": "duration"}

// scalars are Go's predeclared types as a file writes them.
var scalars = map[string]string{
	"string": "string", "bool": "boolean", "float64": "number", "float32": "number", "any": "any value",
	"int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer", "uint64": "integer",
}

// source is one package of the module, read from its folder.
type source struct {
	name    string
	doc     *doc.Package
	types   map[string]*ast.TypeSpec
	imports map[string]string // module import paths by the name files use
}

// typeRef is a struct type that gets a section of the page.
type typeRef struct {
	pkg  *source
	spec *ast.TypeSpec
	doc  string
}

// reference renders the page: a section per struct type, in the order a
// reader meets them from Scenario down.
type reference struct {
	fset    *token.FileSet
	root    *source
	loaded  map[string]*source
	queued  map[*ast.TypeSpec]bool
	pending []typeRef
	out     strings.Builder
	err     error
}

// scenarioReference generates docs/reference/scenario.md from the source
// of package scenarios and of the module's packages it imports.
func scenarioReference() (string, error) {
	r := &reference{fset: token.NewFileSet(), loaded: map[string]*source{}, queued: map[*ast.TypeSpec]bool{}}
	root, err := r.load(module + "scenarios")
	if err != nil {
		return "", err
	}
	r.root = root
	parse := root.funcDoc("Parse")
	if parse == "" {
		return "", fmt.Errorf("no doc comment on func Parse in package scenarios")
	}
	fmt.Fprintf(&r.out, "# Scenario file reference\n\n"+
		"<!-- Generated from the doc comments of package scenarios by TestReferenceDescribesTheScenarioFile "+
		"(go test ./scenarios -run TestReferenceDescribesTheScenarioFile -update). Do not edit. -->\n\n"+
		"Every key of a scenario file, with the doc comment of the Go field it fills: a scenario file is "+
		"`scenarios.Scenario` written as YAML, and its keys are the fields' JSON names.\n\n%s\n"+
		"Types: a *duration* is a string with a unit (\"1s\", \"1m30s\"); a *list* is a YAML sequence; "+
		"a *map* is a YAML mapping of the keys and values named; an *object* is a mapping of the keys its section lists.\n\n",
		markdown(root.doc, parse))
	spec, ok := root.types["Scenario"]
	if !ok {
		return "", fmt.Errorf("no type Scenario in package scenarios")
	}
	r.section(typeRef{root, spec, root.typeDoc("Scenario")})
	return strings.TrimRight(r.out.String(), "\n") + "\n", r.err
}

// load reads the package of import path (one of this module's) from its
// folder, its doc comments with it.
func (r *reference) load(path string) (*source, error) {
	if s, ok := r.loaded[path]; ok {
		return s, nil
	}
	dir := filepath.Join("..", filepath.FromSlash(strings.TrimPrefix(path, module)))
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	s := &source{types: map[string]*ast.TypeSpec{}, imports: map[string]string{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(r.fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(p, module) {
				continue
			}
			local := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			s.imports[local] = p
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, sp := range g.Specs {
					ts := sp.(*ast.TypeSpec)
					s.types[ts.Name.Name] = ts
				}
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	s.name = files[0].Name.Name
	if s.doc, err = doc.NewFromFiles(r.fset, files, path, doc.AllDecls|doc.PreserveAST); err != nil {
		return nil, err
	}
	r.loaded[path] = s
	return s, nil
}

// typeDoc is the doc comment of the exported type name.
func (s *source) typeDoc(name string) string {
	for _, t := range s.doc.Types {
		if t.Name == name {
			return t.Doc
		}
	}
	return ""
}

// funcDoc is the doc comment of the exported function name, a
// constructor of a type's included.
func (s *source) funcDoc(name string) string {
	funcs := s.doc.Funcs
	for _, t := range s.doc.Types {
		funcs = append(funcs, t.Funcs...)
	}
	for _, f := range funcs {
		if f.Name == name {
			return f.Doc
		}
	}
	return ""
}

// title is the heading of t's section: its name, qualified outside
// package scenarios.
func (r *reference) title(t typeRef) string {
	if t.pkg == r.root {
		return t.spec.Name.Name
	}
	return t.pkg.name + "." + t.spec.Name.Name
}

// section writes t's heading, doc comment and table of keys, then the
// sections of the struct types first met in that table.
func (r *reference) section(t typeRef) {
	fmt.Fprintf(&r.out, "## %s\n\n%s\n", r.title(t), markdown(t.pkg.doc, t.doc))
	fmt.Fprintf(&r.out, "| key | type | description |\n| --- | --- | --- |\n")
	for _, f := range t.spec.Type.(*ast.StructType).Fields.List {
		if len(f.Names) == 0 {
			r.fail("%s: an embedded field, which the generator does not follow", r.title(t))
		}
		text := f.Doc.Text()
		if text == "" {
			text = f.Comment.Text()
		}
		cell := strings.ReplaceAll(strings.Join(strings.Fields(markdown(t.pkg.doc, text)), " "), "|", `\|`)
		for _, name := range f.Names {
			if key := yamlKey(name, f.Tag); key != "" {
				fmt.Fprintf(&r.out, "| `%s` | %s | %s |\n", key, r.yamlType(t.pkg, f.Type), cell)
			}
		}
	}
	r.out.WriteString("\n")
	children := r.pending
	r.pending = nil
	for _, c := range children {
		r.section(c)
	}
}

// yamlKey is the key a file writes the field name (with tag) under: its
// JSON name, the Go name when the tag gives none, "" for a field a file
// does not hold.
func yamlKey(name *ast.Ident, tag *ast.BasicLit) string {
	if !name.IsExported() {
		return ""
	}
	json := ""
	if tag != nil {
		json = reflect.StructTag(strings.Trim(tag.Value, "`")).Get("json")
	}
	key, _, _ := strings.Cut(json, ",")
	switch key {
	case "-":
		return ""
	case "":
		return name.Name
	}
	return key
}

// yamlType is how a file writes a value of type expr, declared in pkg: a
// scalar, a list, a map, or an object linking to its section, which it
// queues when it is new.
func (r *reference) yamlType(pkg *source, expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return r.yamlType(pkg, e.X)
	case *ast.ArrayType:
		return "list of " + r.yamlType(pkg, e.Elt)
	case *ast.MapType:
		return "map of " + r.yamlType(pkg, e.Key) + " to " + r.yamlType(pkg, e.Value)
	case *ast.InterfaceType:
		return "any value"
	case *ast.Ident:
		if s, ok := scalars[e.Name]; ok {
			return s
		}
		return r.named(pkg, e.Name)
	case *ast.SelectorExpr:
		local := e.X.(*ast.Ident).Name
		if s, ok := externalTypes[local+"."+e.Sel.Name]; ok {
			return s
		}
		path, ok := pkg.imports[local]
		if !ok {
			return r.fail("%s.%s: a type from outside the module, not in externalTypes", local, e.Sel.Name)
		}
		other, err := r.load(path)
		if err != nil {
			return r.fail("%v", err)
		}
		return r.named(other, e.Sel.Name)
	}
	return r.fail("%T: a type expression the generator does not know", expr)
}

// named is yamlType of the type name declared in pkg: an alias or a
// defined non-struct type as what it stands for, a struct as an object.
func (r *reference) named(pkg *source, name string) string {
	spec, ok := pkg.types[name]
	if !ok {
		return r.fail("no type %s in package %s", name, pkg.name)
	}
	if _, ok := spec.Type.(*ast.StructType); !ok || spec.Assign.IsValid() {
		return r.yamlType(pkg, spec.Type)
	}
	t := typeRef{pkg, spec, pkg.typeDoc(name)}
	if !r.queued[spec] {
		r.queued[spec] = true
		r.pending = append(r.pending, t)
	}
	title := r.title(t)
	return fmt.Sprintf("object [%s](#%s)", title, anchor(title))
}

// fail records the first error and returns a placeholder.
func (r *reference) fail(format string, args ...any) string {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	return "?"
}

// markdown renders a doc comment as Markdown.
func markdown(p *doc.Package, text string) string {
	pr := p.Printer()
	pr.HeadingLevel = 3
	return string(pr.Markdown(p.Parser().Parse(text)))
}

// anchor is the id GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces as dashes.
func anchor(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(heading) {
		switch {
		case c == ' ':
			b.WriteRune('-')
		case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
			b.WriteRune(c)
		}
	}
	return b.String()
}
