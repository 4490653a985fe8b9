package kubebuilder

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// starter is a scenario file as init writes it: the fields a reader meets
// first, in that order.
type starter struct {
	Name        string        `yaml:"name"`
	Description string        `yaml:"description"`
	Catches     string        `yaml:"catches"`
	Objects     []starterFile `yaml:"objects"`
	Goal        starterGoal   `yaml:"goal"`
	Timing      starterTiming `yaml:"timing"`
}

type starterFile struct {
	File string `yaml:"file"`
}

type starterGoal struct {
	Objects []starterExpectation `yaml:"objects"`
}

type starterExpectation struct {
	Select    map[string]string `yaml:"select"`
	Match     map[string]any    `yaml:"match,omitempty"`
	Condition string            `yaml:"condition,omitempty"`
}

type starterTiming struct {
	Deadline string `yaml:"deadline"`
	Settle   string `yaml:"settle"`
}

// readyTypes are the condition types a starter goal waits for, in order of
// preference, when the kind's status has conditions and the controllers'
// code names the type.
var readyTypes = []string{"Available", "Ready"}

// scenario is the starter scenario of res: its CRDs and its sample created,
// and a goal the schema can state: its Available or Ready condition true
// when its status has conditions and the controllers set that type;
// otherwise the operator goes quiet. Every child of a kind the RBAC lets
// the controller create, when controlled by one of res, names one that
// exists.
func (p *Project) scenario(pkg *Package, res Resource, crd *apiextensionsv1.CustomResourceDefinition, smp sample, crdDir string, rbac []runtime.Object) (File, error) {
	dir := filepath.Join(pkg.Dir, ScenarioDir)
	rel := func(target string) string {
		r, _ := filepath.Rel(dir, target)
		return filepath.ToSlash(r)
	}
	u := unstructured.Unstructured{Object: smp.obj}
	name := strings.ToLower(res.Kind)
	s := starter{
		Name:        name,
		Description: fmt.Sprintf("The %s of %s created once; no faults. Written by converge init as a starting point.", res.Kind, smp.file),
		Catches:     fmt.Sprintf("an operator that never settles on its own sample %s (a write loop, an error retried for ever) or leaves a child of a deleted %s", res.Kind, res.Kind),
		Objects:     []starterFile{{File: rel(crdDir)}, {File: rel(filepath.FromSlash(smp.file))}},
		Timing:      starterTiming{Deadline: "1m", Settle: "5s"},
	}
	self := map[string]string{"apiVersion": u.GetAPIVersion(), "kind": res.Kind, "name": u.GetName()}
	what := "the operator goes quiet (no write for the settle window)"
	if t := p.readyType(pkg, crd); t != "" {
		s.Goal.Objects = append(s.Goal.Objects, starterExpectation{
			Select: self,
			Match:  map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": t, "status": "True"}}}},
		})
		what = fmt.Sprintf("its %s condition is True and the operator goes quiet", t)
	}
	own := map[string]bool{}
	for _, r := range p.Resources {
		g := gvk(r)
		own[g.Group+"/"+strings.ToLower(r.Kind)+"s"] = true
	}
	own[crd.Spec.Group+"/"+crd.Spec.Names.Plural] = true
	for _, child := range childKinds(rbac, own) {
		apiVersion, _ := child.ToAPIVersionAndKind()
		s.Goal.Objects = append(s.Goal.Objects, starterExpectation{
			Select: map[string]string{"apiVersion": apiVersion, "kind": child.Kind},
			Condition: fmt.Sprintf("!has(object.metadata.ownerReferences) || object.metadata.ownerReferences.all(r, !has(r.controller) || !r.controller || r.kind != '%s' || objects.%s.exists(o, o.metadata.uid == r.uid))",
				res.Kind, res.Kind),
		})
	}
	if len(s.Goal.Objects) == 0 || s.Goal.Objects[0].Match == nil {
		// The kind itself is always selected: the scenario reads it.
		s.Goal.Objects = append([]starterExpectation{{Select: self, Condition: "has(object.metadata.uid)"}}, s.Goal.Objects...)
	}
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return File{}, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by converge init: a starting point, yours to edit.\n")
	fmt.Fprintf(&b, "# The goal: %s; a child that a %s controls names a %s that exists.\n", what, res.Kind, res.Kind)
	fmt.Fprintf(&b, "# Add what your operator must reach (goal.objects), what must never happen\n# (invariants) and faults: docs/kubebuilder.md in converge's repository.\n")
	b.Write(body.Bytes())
	return File{Path: filepath.Join(dir, name+".yaml"), Data: b.Bytes()}, nil
}

// readyType is the condition type a goal can wait for: the kind's status
// has a conditions list (in its storage version's schema) and the
// controllers' code names the type as a string.
func (p *Project) readyType(pkg *Package, crd *apiextensionsv1.CustomResourceDefinition) string {
	if !hasConditions(crd) {
		return ""
	}
	entries, err := os.ReadDir(filepath.Join(p.Root, pkg.Dir))
	if err != nil {
		return ""
	}
	var src []byte
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			data, err := readFile(filepath.Join(p.Root, pkg.Dir, e.Name()))
			if err == nil {
				src = append(src, data...)
			}
		}
	}
	for _, t := range readyTypes {
		if bytes.Contains(src, []byte(`"`+t+`"`)) {
			return t
		}
	}
	return ""
}

func hasConditions(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if !v.Storage || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		status, ok := v.Schema.OpenAPIV3Schema.Properties["status"]
		if !ok {
			return false
		}
		c, ok := status.Properties["conditions"]
		return ok && c.Type == "array"
	}
	return false
}
