package kubebuilder

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Package is a controllers' package: its reconcilers and what its tests
// already declare.
type Package struct {
	// Dir is its folder, relative to the project's root.
	Dir        string
	ImportPath string
	// Name is its Go package name.
	Name        string
	Reconcilers []Reconciler
	// HasTestMain: one of its test files declares TestMain already.
	HasTestMain bool
}

// Reconciler is a type with a SetupWithManager(mgr) method, and how to
// build it from a manager named mgr.
type Reconciler struct {
	Type string
	// Fields are the keyed fields of its composite literal, in order.
	Fields []Field
	// Unset are fields nothing fills, with their types: left zero.
	Unset []string
}

// Field is one keyed field of a reconciler's literal.
type Field struct{ Name, Value string }

// readPackage parses the Go files of dir (relative to p.Root); nil when it
// holds no reconciler.
func (p *Project) readPackage(dir string) (*Package, error) {
	abs := filepath.Join(p.Root, dir)
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, nil
	}
	fset := token.NewFileSet()
	pkg := &Package{Dir: dir, ImportPath: p.Module + "/" + filepath.ToSlash(dir)}
	structs := map[string]*ast.StructType{}
	setups := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		src, err := readFile(filepath.Join(abs, name))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, filepath.Join(abs, name), src, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, name), err)
		}
		if strings.HasSuffix(name, "_test.go") {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "TestMain" {
					pkg.HasTestMain = true
				}
			}
			continue
		}
		pkg.Name = f.Name.Name
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							structs[ts.Name.Name] = st
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "SetupWithManager" && d.Type.Params.NumFields() == 1 && d.Name.IsExported() {
					if t := receiverType(d.Recv); t != "" {
						setups[t] = true
					}
				}
			}
		}
	}
	for t := range setups {
		st, ok := structs[t]
		if !ok || !ast.IsExported(t) {
			continue
		}
		pkg.Reconcilers = append(pkg.Reconcilers, synthesize(t, st, fset))
	}
	if len(pkg.Reconcilers) == 0 {
		return nil, nil
	}
	sort.Slice(pkg.Reconcilers, func(i, j int) bool { return pkg.Reconcilers[i].Type < pkg.Reconcilers[j].Type })
	return pkg, nil
}

func receiverType(recv *ast.FieldList) string {
	if recv == nil || len(recv.List) != 1 {
		return ""
	}
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// synthesize fills a reconciler's fields from what a manager gives: the
// client, the scheme, an event recorder. The rest stay zero.
func synthesize(typ string, st *ast.StructType, fset *token.FileSet) Reconciler {
	r := Reconciler{Type: typ}
	for _, f := range st.Fields.List {
		t := exprString(fset, f.Type)
		names := make([]string, 0, len(f.Names))
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		if len(names) == 0 { // embedded: the field is named by its type
			names = []string{t[strings.LastIndex(t, ".")+1:]}
			names[0] = strings.TrimPrefix(names[0], "*")
		}
		for _, name := range names {
			if !ast.IsExported(name) {
				continue
			}
			switch {
			case t == "client.Client" || t == "client.WithWatch":
				r.Fields = append(r.Fields, Field{name, "mgr.GetClient()"})
			case t == "*runtime.Scheme":
				r.Fields = append(r.Fields, Field{name, "mgr.GetScheme()"})
			case t == "record.EventRecorder":
				r.Fields = append(r.Fields, Field{name, "mgr.GetEventRecorderFor(" + strconv.Quote(strings.ToLower(strings.TrimSuffix(typ, "Reconciler"))+"-controller") + ")"})
			default:
				r.Unset = append(r.Unset, name+" "+t)
			}
		}
	}
	return r
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	return b.String()
}

// fromMain replaces a reconciler's fields by those cmd/main.go gives it,
// where main builds it from the manager alone: (&pkg.Type{F: mgr.X(...)}).
func (p *Project) fromMain(pkg *Package) {
	mainFile := filepath.Join(p.Root, "cmd", "main.go")
	if p.v3() {
		mainFile = filepath.Join(p.Root, "main.go")
	}
	src, err := readFile(mainFile)
	if err != nil {
		return
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, mainFile, src, parser.SkipObjectResolution)
	if err != nil {
		return
	}
	alias := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == pkg.ImportPath {
			alias = pkg.Name
			if imp.Name != nil {
				alias = imp.Name.Name
			}
		}
	}
	if alias == "" {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "SetupWithManager" {
			return true
		}
		x := sel.X
		if paren, ok := x.(*ast.ParenExpr); ok {
			x = paren.X
		}
		if u, ok := x.(*ast.UnaryExpr); ok && u.Op == token.AND {
			x = u.X
		}
		lit, ok := x.(*ast.CompositeLit)
		if !ok {
			return true
		}
		tsel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || exprString(fset, tsel.X) != alias {
			return true
		}
		i := slices.IndexFunc(pkg.Reconcilers, func(r Reconciler) bool { return r.Type == tsel.Sel.Name })
		if i < 0 {
			return true
		}
		var fields []Field
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok || !fromManager(kv.Value) {
				return true // main builds it from more than the manager
			}
			fields = append(fields, Field{exprString(fset, kv.Key), exprString(fset, kv.Value)})
		}
		r := &pkg.Reconcilers[i]
		set := map[string]bool{}
		for _, f := range fields {
			set[f.Name] = true
		}
		r.Fields = fields
		r.Unset = slices.DeleteFunc(r.Unset, func(u string) bool { return set[strings.Fields(u)[0]] })
		return true
	})
}

// fromManager: e is mgr.Method(literals...), or a literal.
func fromManager(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "mgr" {
			return false
		}
		for _, a := range e.Args {
			if _, ok := a.(*ast.BasicLit); !ok {
				return false
			}
		}
		return true
	}
	return false
}
