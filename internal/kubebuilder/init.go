package kubebuilder

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/manifest"
	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/sim"
)

// File is a file init writes.
type File struct {
	// Path is relative to the project's root.
	Path string
	Data []byte
}

// ScenarioDir is where the starter scenarios go, relative to a controllers'
// package.
const ScenarioDir = "testdata/converge"

// Plan reads the project at root (the folder holding PROJECT) and returns
// the files init writes, and notes for the user (what it could not do).
// It fails, naming what it looked for and where, when it cannot read the
// project: no reconciler, no config/rbac, a CRD it cannot parse.
func Plan(root string) ([]File, []string, error) {
	p, err := ReadProject(root)
	if err != nil {
		return nil, nil, err
	}
	var pkgs []*Package
	var looked []string
	for _, dir := range p.controllerDirs() {
		looked = append(looked, dir)
		pkg, err := p.readPackage(dir)
		if err != nil {
			return nil, nil, err
		}
		if pkg != nil {
			p.fromMain(pkg)
			pkgs = append(pkgs, pkg)
		}
	}
	if len(pkgs) == 0 {
		return nil, nil, fmt.Errorf("no reconciler (a type with a SetupWithManager method) in %s under %s", strings.Join(looked, ", "), root)
	}
	rbacDir, ok := p.configDir("rbac")
	if !ok {
		return nil, nil, fmt.Errorf("no config/rbac under %s: converge runs the controller as the ServiceAccount its RBAC binds", root)
	}
	rbac, err := sim.ReadRBAC(filepath.Join(root, rbacDir))
	if err != nil {
		return nil, nil, err
	}
	sa, err := serviceAccount(rbac)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", rbacDir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	crdDir, hasCRDs := p.configDir("crd")
	if hasCRDs {
		if crds, err = sim.ReadCRDs(filepath.Join(root, crdDir)); err != nil {
			return nil, nil, err
		}
	}
	samples, err := p.samples()
	if err != nil {
		return nil, nil, err
	}
	var files []File
	var notes []string
	env, err := p.managerEnv()
	if err != nil {
		// The environment is a help, not what the test needs to start.
		notes = append(notes, fmt.Sprintf("%v: the test sets no environment from it", err))
	}
	if env != nil {
		for _, u := range env.Unresolved {
			notes = append(notes, fmt.Sprintf("%s: not set in the test, as %s gives it no value (%s): set it in the test if the operator needs it", u.Name, env.dir, u.Why))
		}
	}
	for _, pkg := range pkgs {
		test, err := p.testFile(pkg, sa, rbacDir, env)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, test)
		for _, r := range pkg.Reconcilers {
			if len(r.Unset) > 0 {
				notes = append(notes, fmt.Sprintf("%s.%s: left zero, as nothing the manager gives fills them: %s (set them in %s)", pkg.Name, r.Type, strings.Join(r.Unset, ", "), test.Path))
			}
		}
		for _, res := range p.Resources {
			if !res.Controller || !p.inPackage(res, pkg) {
				continue
			}
			crd := findCRD(crds, res)
			if crd == nil {
				notes = append(notes, fmt.Sprintf("%s: no CustomResourceDefinition of it in %s: no scenario written", res.Kind, filepath.Join(root, "config", "crd")))
				continue
			}
			sample, ok := samples[gvk(res)]
			if !ok {
				notes = append(notes, fmt.Sprintf("%s: no sample of it in %s: no scenario written", res.Kind, filepath.Join(root, "config", "samples")))
				continue
			}
			if missing := requiredMissing(crd, sample.obj); len(missing) > 0 {
				notes = append(notes, fmt.Sprintf("%s: %s has no %s, which the CRD requires: the API server refuses it, and the scenario fails until the sample is filled in", res.Kind, sample.file, strings.Join(missing, ", ")))
			}
			s, err := p.scenario(pkg, res, crd, sample, crdDir, rbac)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, s)
		}
	}
	return files, notes, nil
}

// inPackage: res's controller lives in pkg (its group's folder in a
// multigroup project).
func (p *Project) inPackage(res Resource, pkg *Package) bool {
	if !p.MultiGroup {
		return true
	}
	return filepath.Base(pkg.Dir) == res.Group || (filepath.Base(pkg.Dir) == "controller" || filepath.Base(pkg.Dir) == "controllers") && res.Group == ""
}

func gvk(res Resource) schema.GroupVersionKind {
	group := res.Group
	if res.Domain != "" {
		group = strings.TrimPrefix(res.Group+"."+res.Domain, ".")
	}
	return schema.GroupVersionKind{Group: group, Version: res.Version, Kind: res.Kind}
}

func findCRD(crds []*apiextensionsv1.CustomResourceDefinition, res Resource) *apiextensionsv1.CustomResourceDefinition {
	want := gvk(res)
	for _, c := range crds {
		if c.Spec.Group == want.Group && c.Spec.Names.Kind == want.Kind {
			return c
		}
	}
	return nil
}

// serviceAccount is the ServiceAccount the RBAC binds: the one of its
// ServiceAccounts that a binding names.
func serviceAccount(rbac []runtime.Object) (string, error) {
	var accounts, bound []string
	for _, obj := range rbac {
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			accounts = append(accounts, o.Name)
		case *rbacv1.ClusterRoleBinding:
			bound = append(bound, subjects(o.Subjects)...)
		case *rbacv1.RoleBinding:
			bound = append(bound, subjects(o.Subjects)...)
		}
	}
	var both []string
	for _, a := range accounts {
		if slices.Contains(bound, a) && !slices.Contains(both, a) {
			both = append(both, a)
		}
	}
	switch {
	case len(both) == 1:
		return both[0], nil
	case slices.Contains(both, "controller-manager"):
		return "controller-manager", nil
	case len(both) == 0:
		return "", errors.New("no ServiceAccount that a binding names")
	}
	return "", fmt.Errorf("several ServiceAccounts are bound (%s) and none is controller-manager", strings.Join(both, ", "))
}

func subjects(ss []rbacv1.Subject) []string {
	var out []string
	for _, s := range ss {
		if s.Kind == rbacv1.ServiceAccountKind {
			out = append(out, s.Name)
		}
	}
	return out
}

// managerEnv is the environment config/manager gives the manager's
// container, when it gives it any; nil when there is no config/manager or
// no variable, or none of its workloads' containers is the manager. A
// config/manager it cannot read is an error.
func (p *Project) managerEnv() (*managerEnv, error) {
	dir, ok := p.configDir("manager")
	if !ok {
		return nil, nil
	}
	env, err := sim.ReadContainerEnv("", filepath.Join(p.Root, dir))
	switch {
	case errors.Is(err, sim.ErrNoContainer):
		return nil, nil
	case err != nil:
		return nil, err
	case len(env.Env) == 0 && len(env.Unresolved) == 0:
		return nil, nil
	}
	return &managerEnv{ContainerEnv: env, dir: dir}, nil
}

// managerEnv is the environment of the manager's container and the folder
// that gives it, relative to the project's root.
type managerEnv struct {
	sim.ContainerEnv
	dir string
}

// sample is a sample object and the file holding it.
type sample struct {
	file string // relative to the project's root
	obj  map[string]any
}

// samples are config/samples' objects by kind, the first of each; the files
// are read one by one, so that a scenario can name the file.
func (p *Project) samples() (map[schema.GroupVersionKind]sample, error) {
	dir, ok := p.configDir("samples")
	out := map[schema.GroupVersionKind]sample{}
	if !ok {
		return out, nil
	}
	entries, err := os.ReadDir(filepath.Join(p.Root, dir))
	if err != nil {
		return nil, err
	}
	fsys := userfile.FS(p.Root)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) || slices.Contains([]string{"kustomization.yaml", "kustomization.yml"}, name) {
			continue
		}
		rel := filepath.ToSlash(filepath.Join(dir, name))
		docs, err := manifest.Read(fsys, rel, manifest.Limits{Total: maxFile})
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var obj map[string]any
			if err := yaml.Unmarshal(d.Raw, &obj); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", d.Source, d.N, err)
			}
			u := unstructured.Unstructured{Object: obj}
			if _, seen := out[u.GroupVersionKind()]; !seen && u.GetKind() != "" && u.GetName() != "" {
				out[u.GroupVersionKind()] = sample{file: rel, obj: obj}
			}
		}
	}
	return out, nil
}

// testTemplate is converge_test.go.
var testTemplate = template.Must(template.New("test").Parse(`// Written by converge init: a starting point, yours to edit.
// It runs the operator through the scenarios in {{.ScenarioDir}} on fake (in
// virtual time) and envtest (a real kube-apiserver, etcd and
// kube-controller-manager), as the ServiceAccount its RBAC binds.
// Options.Faults adds converge's fault profiles; see
// https://github.com/converge-lab/converge/blob/main/docs/kubebuilder.md.

package {{.Package}}_test

import (
{{- if not .HasTestMain}}
	"os"
{{- end}}
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim"
{{range .APIs}}
	{{.Alias}} "{{.Path}}"
{{- end}}
	{{.Package}} "{{.ImportPath}}"
)
{{if not .HasTestMain}}
// TestMain gives the tests converge's -converge.* flags and prepares the
// process for its runs.
func TestMain(m *testing.M) { os.Exit(scenariotest.Main(m)) }
{{else}}
// This package's TestMain is its own: call scenariotest.Main(m) from it for
// the -converge.* flags (or set them in $CONVERGE_FLAGS).
{{end}}
func TestScenarios(t *testing.T) {
{{- with .Env}}{{if .Names}}
	// The environment {{.Dir}} gives the operator's container
	// ({{.Names}}), as it has it in its cluster.
	scenariotest.SetenvFrom(t, {{printf "%q" .Container}}, {{printf "%q" .Path}})
{{- end}}{{end}}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
{{- range .APIs}}
	if err := {{.Alias}}.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
{{- end}}
	scenariotest.Run(t, "{{.ScenarioDir}}", scenarios.Manager{
		ControllerName: "{{.Name}}",
		Scheme:         scheme,
		RBAC:           sim.Identity{ServiceAccount: "{{.ServiceAccount}}", RBACPaths: []string{"{{.RBAC}}"}},
		Setup: func(mgr manager.Manager, _ scenarios.Instance) error {
{{- range .Reconcilers}}
{{- range .Unset}}
			// Left zero by converge init: {{.}}
{{- end}}
			if err := (&{{$.Package}}.{{.Type}}{
{{- range .Fields}}
				{{.Name}}: {{.Value}},
{{- end}}
			}).SetupWithManager(mgr); err != nil {
				return err
			}
{{- end}}
			return nil
		},
	}, scenariotest.Options{})
}
`))

type apiImport struct{ Alias, Path string }

// testFile is converge_test.go for pkg.
func (p *Project) testFile(pkg *Package, sa, rbacDir string, env *managerEnv) (File, error) {
	var apis []apiImport
	for _, r := range p.Resources {
		if r.Path == "" || !strings.HasPrefix(r.Path, p.Module+"/") || slices.ContainsFunc(apis, func(a apiImport) bool { return a.Path == r.Path }) {
			continue
		}
		apis = append(apis, apiImport{Alias: alias(r), Path: r.Path})
	}
	rel, err := filepath.Rel(pkg.Dir, rbacDir)
	if err != nil {
		return File{}, err
	}
	var envData map[string]string
	if env != nil {
		envRel, err := filepath.Rel(pkg.Dir, env.dir)
		if err != nil {
			return File{}, err
		}
		var names []string
		for _, e := range env.Env {
			names = append(names, e.Name)
		}
		envData = map[string]string{"Dir": filepath.ToSlash(env.dir), "Path": filepath.ToSlash(envRel), "Container": env.Container, "Names": strings.Join(names, ", ")}
	}
	var b bytes.Buffer
	err = testTemplate.Execute(&b, map[string]any{
		"Package": pkg.Name, "ImportPath": pkg.ImportPath, "HasTestMain": pkg.HasTestMain, "APIs": apis,
		"ScenarioDir": ScenarioDir, "Name": cmpOr(p.Name, pkg.Name), "ServiceAccount": sa,
		"RBAC": filepath.ToSlash(rel), "Reconcilers": pkg.Reconcilers, "Env": envData,
	})
	if err != nil {
		return File{}, err
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return File{}, fmt.Errorf("converge's bug: the test it writes does not parse: %w\n%s", err, b.String())
	}
	return File{Path: filepath.Join(pkg.Dir, "converge_test.go"), Data: src}, nil
}

// alias is the import name kubebuilder gives an API package: group and
// version, lower case, letters and digits only.
func alias(r Resource) string {
	a := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			return c
		}
		return -1
	}, strings.ToLower(r.Group+r.Version))
	if a == "" || a[0] >= '0' && a[0] <= '9' {
		a = "api" + a
	}
	return a
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// childKinds are the kinds the controller's role lets it create, but for
// its own kinds, Events, Leases and reviews: the children it may own. Its
// role is any Role or ClusterRole that grants it its own kinds (the one
// controller-gen writes from the reconcilers' markers), not the leader
// election Role beside it.
func childKinds(rbac []runtime.Object, own map[string]bool) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, obj := range rbac {
		var rules []rbacv1.PolicyRule
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			rules = o.Rules
		case *rbacv1.Role:
			rules = o.Rules
		}
		if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.ContainsFunc(r.APIGroups, func(g string) bool {
				return slices.ContainsFunc(r.Resources, func(res string) bool { return own[g+"/"+res] })
			})
		}) {
			continue
		}
		for _, rule := range rules {
			if !slices.Contains(rule.Verbs, "create") && !slices.Contains(rule.Verbs, "*") {
				continue
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					if strings.Contains(res, "/") || own[g+"/"+res] {
						continue
					}
					switch g + "/" + res {
					case "/events", "events.k8s.io/events", "coordination.k8s.io/leases", "authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews":
						continue
					}
					if k, ok := builtinKind(g, res); ok && !slices.Contains(out, k) {
						out = append(out, k)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// builtinKind is the kind client-go's scheme serves as group/resource, at
// its preferred version.
func builtinKind(group, resource string) (schema.GroupVersionKind, bool) {
	for _, gv := range scheme.Scheme.PrioritizedVersionsForGroup(group) {
		for kind := range scheme.Scheme.KnownTypes(gv) {
			plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
			if plural.Resource == resource && !strings.HasSuffix(kind, "List") {
				return gv.WithKind(kind), true
			}
		}
	}
	return schema.GroupVersionKind{}, false
}

// Write writes files under root, each new: when any of them exists,
// nothing is written and the error names every one that does.
func Write(root string, files []File) error {
	var exist []string
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(root, f.Path)); err == nil {
			exist = append(exist, f.Path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if len(exist) > 0 {
		return fmt.Errorf("%s already there: converge init writes no file that exists (move it away to have it written again)", strings.Join(exist, ", "))
	}
	for _, f := range files {
		p := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = out.Write(f.Data)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// requiredMissing are the top-level fields the CRD's storage version
// requires that obj lacks or leaves empty (kubebuilder's scaffolded sample
// holds only "spec:" and a comment).
func requiredMissing(crd *apiextensionsv1.CustomResourceDefinition, obj map[string]any) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if !v.Storage || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		for _, field := range v.Schema.OpenAPIV3Schema.Required {
			if obj[field] == nil {
				out = append(out, field)
			}
		}
	}
	return out
}
