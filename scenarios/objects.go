package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	imanifest "github.com/converge-lab/converge/internal/manifest"
	"github.com/converge-lab/converge/sim"
)

// Object is an object as a scenario writes it: JSON values, whole numbers
// as int64, as Kubernetes' unstructured objects hold them.
type Object map[string]any

// UnmarshalJSON keeps whole numbers whole.
func (o *Object) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if m == nil {
		*o = nil
		return nil
	}
	*o = Object(normalize(m).(map[string]any))
	return nil
}

// normalize turns json.Numbers into int64 or float64.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// indexMark is replaced by an object's index when a manifest is counted.
const indexMark = "{{index}}"

// checkManifest lists what is wrong with a manifest created count times.
func checkManifest(m Object, count int) []string {
	var out []string
	u := unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		out = append(out, "apiVersion and kind are required")
	}
	name := u.GetName()
	if name == "" && u.GetGenerateName() == "" {
		out = append(out, "metadata.name is required")
	}
	if count > 1 && name != "" && !strings.Contains(name, indexMark) {
		out = append(out, fmt.Sprintf("metadata.name %q: %d copies need %s in their name", name, count, indexMark))
	}
	out = append(out, checkNow(map[string]any(m), "")...)
	if name != "" {
		longest := strings.ReplaceAll(name, indexMark, strconv.Itoa(max(count-1, 0)))
		if msgs := validation.IsDNS1123Subdomain(longest); len(msgs) > 0 {
			out = append(out, fmt.Sprintf("metadata.name %q: %s", longest, strings.Join(msgs, "; ")))
		}
	}
	return out
}

// readObjectFiles replaces the file entries of s with the manifests they
// hold, read from files relative to dir, so the scenario (and a result that records it)
// needs nothing else. A folder's *.yaml, *.yml and *.json files are read
// in name order, not recursively; a folder holding a kustomization is read
// as kustomize builds it.
func readObjectFiles(s *Scenario, files fs.FS, dir string) []error {
	var errs []error
	s.Objects, errs = readFiles(s.Objects, "objects", files, dir, true)
	var more []error
	s.Controller.RBAC, more = readFiles(s.Controller.RBAC, "controller.rbac", files, dir, false)
	errs = append(errs, more...)
	s.Others = slices.Clone(s.Others)
	for i := range s.Others {
		c := &s.Others[i]
		c.RBAC, more = readFiles(c.RBAC, fmt.Sprintf("others[%d].rbac", i), files, dir, false)
		errs = append(errs, more...)
	}
	return errs
}

// readFiles replaces each entry of list that names a file by one entry per
// manifest the file holds; at is where list is in the file. Manifests are
// checked as objects the scenario creates when check is set.
func readFiles(list []Objects, at string, files fs.FS, dir string, check bool) ([]Objects, []error) {
	var errs []error
	var out []Objects
	for i, o := range list {
		if o.File == "" {
			out = append(out, o)
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fieldError{fmt.Sprintf("%s[%d].file", at, i), fmt.Sprintf(format, args...)})
		}
		if files == nil {
			bad("%s: files are read relative to a scenario file; this scenario has none", o.File)
			continue
		}
		name := path.Join(dir, strings.ReplaceAll(o.File, `\`, "/"))
		if path.IsAbs(o.File) || !fs.ValidPath(name) {
			bad("%q: a path relative to the scenario's folder, and inside what it can read", o.File)
			continue
		}
		docs, err := readManifests(files, name)
		if err != nil {
			bad("%v", err)
			continue
		}
		for _, d := range docs {
			if check {
				for _, msg := range checkManifest(d.obj, o.Count) {
					bad("%s, document %d: %s", d.file, d.n, msg)
				}
			}
			out = append(out, Objects{Manifest: d.obj, Count: o.Count, Source: d.file})
		}
	}
	return out, errs
}

type manifest struct {
	file string
	n    int
	obj  Object
}

// readManifests reads the YAML or JSON documents of a file, of a folder's
// files, or of what a folder's kustomization builds (manifest.Read).
func readManifests(files fs.FS, name string) ([]manifest, error) {
	docs, err := imanifest.Read(files, name, imanifest.Limits{Total: MaxFileSize * 10})
	if err != nil {
		return nil, err
	}
	var out []manifest
	for _, d := range docs {
		js, err := yaml.YAMLToJSON(d.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", d.Source, d.N, err)
		}
		var obj Object
		if err := json.Unmarshal(js, &obj); err != nil {
			return nil, fmt.Errorf("%s, document %d: not an object: %w", d.Source, d.N, err)
		}
		if obj == nil {
			continue
		}
		out = append(out, manifest{file: d.Source, n: d.N, obj: obj})
	}
	return out, nil
}

// expand returns the objects of s, counts expanded, as unstructured
// objects: CustomResourceDefinitions apart, in the order given.
func expand(s *Scenario) (crds []*apiextensionsv1.CustomResourceDefinition, objs []*unstructured.Unstructured, err error) {
	for i, o := range s.Objects {
		for n := range max(o.Count, 1) {
			m := o.Manifest
			if o.Count > 0 {
				m = substitute(m, strconv.Itoa(n)).(map[string]any)
			} else {
				m = runtime.DeepCopyJSON(m)
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GroupVersionKind() == apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, crd, true); err != nil {
					return nil, nil, fmt.Errorf("objects[%d]: %w", i, err)
				}
				crds = append(crds, crd)
				continue
			}
			objs = append(objs, u)
		}
	}
	return crds, objs, nil
}

// substitute copies v with indexMark replaced by index in every string and
// key.
func substitute(v any, index string) any {
	return mapStrings(v, func(s string) string { return strings.ReplaceAll(s, indexMark, index) }, true)
}

// mapStrings copies v (maps, lists and scalars as JSON decodes them) with f
// applied to every string, and to every key when keys is set.
func mapStrings(v any, f func(string) string, keys bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if keys {
				k = f(k)
			}
			out[k] = mapStrings(e, f, keys)
		}
		return out
	case Object:
		return mapStrings(map[string]any(x), f, keys)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapStrings(e, f, keys)
		}
		return out
	case string:
		return f(x)
	}
	return v
}

// kube is what the harness acts through, with full rights and no faults:
// a dynamic client and a mapper from kinds to resources.
type kube struct {
	dynamic dynamic.Interface
	mapper  meta.ResettableRESTMapper
	ns      string
}

// newKube reaches the API through cfg, its kinds mapped by mapper when
// the backend has one (fake's, read in process), else through discovery.
func newKube(cfg *rest.Config, ns string, mapper meta.ResettableRESTMapper) (*kube, error) {
	cfg = rest.CopyConfig(cfg)
	// The harness's own requests are not the controller's: no client-side
	// throttling on them.
	cfg.QPS, cfg.Burst = 1e6, 1e6
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if mapper != nil {
		return &kube{dynamic: dc, mapper: mapper, ns: ns}, nil
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kube{dynamic: dc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), ns: ns}, nil
}

// mapping is the resource of a kind, rediscovered once when the kind is
// new (a CRD established since).
func (k *kube) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	return m, nil
}

// resource is the client of a kind's objects in the run: in its namespace
// when the kind is namespaced.
func (k *kube) resource(gvk schema.GroupVersionKind) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	m, err := k.mapping(gvk)
	if err != nil {
		return nil, nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dynamic.Resource(m.Resource).Namespace(k.ns), m, nil
	}
	return k.dynamic.Resource(m.Resource), m, nil
}

// createObjects installs the scenario's CRDs, then creates its objects,
// namespaced ones in the run's namespace (whatever namespace they name:
// runs on a shared server each have their own).
func createObjects(ctx context.Context, cfg *rest.Config, k *kube, s *Scenario) (int, error) {
	crds, objs, err := expand(s)
	if err != nil {
		return 0, err
	}
	if err := sim.InstallCRDs(ctx, cfg, 0, crds...); err != nil {
		return 0, err
	}
	if len(crds) > 0 {
		k.mapper.Reset()
	}
	now := time.Now()
	for _, u := range objs {
		u.Object = withNow(u.Object, now).(map[string]any)
		client, m, err := k.resource(u.GroupVersionKind())
		if err != nil {
			return 0, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			u.SetNamespace(k.ns)
		}
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return len(crds) + len(objs), nil
}

// kinds are the kinds a scenario's objects, invariants, write rules and
// goal name, in a stable order.
func (s *Scenario) kinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	add := func(apiVersion, kind string) {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" {
			return
		}
		gvk := gv.WithKind(kind)
		if gvk == apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") || slices.Contains(out, gvk) {
			return
		}
		out = append(out, gvk)
	}
	for _, o := range s.Objects {
		u := unstructured.Unstructured{Object: o.Manifest}
		add(u.GetAPIVersion(), u.GetKind())
	}
	for _, inv := range s.Invariants {
		add(inv.Select.APIVersion, inv.Select.Kind)
	}
	for _, w := range s.Writes {
		add(w.Select.APIVersion, w.Select.Kind)
	}
	for _, e := range s.Goal.Objects {
		add(e.Select.APIVersion, e.Select.Kind)
	}
	for _, in := range s.World.Interference {
		add(in.Select.APIVersion, in.Select.Kind)
		u := unstructured.Unstructured{Object: in.Create}
		add(u.GetAPIVersion(), u.GetKind())
	}
	return out
}

// ObjectCount is how many objects the scenario creates, counts expanded.
func (s Scenario) ObjectCount() int {
	n := 0
	for _, o := range s.Objects {
		n += max(o.Count, 1)
	}
	return n
}
