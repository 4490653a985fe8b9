package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/converge-lab/converge/sim/fake/internal/builtin"
	"github.com/converge-lab/converge/sim/fake/internal/crd"
)

// crdCleanupFinalizer holds a CustomResourceDefinition until its custom
// resources are gone, as apiextensions-apiserver's does.
const crdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// registry is what the store serves: the built-in resources, and the
// custom resources of every established CRD. It also plays what the API
// server does around some writes: a CRD is established once stored and
// its resources go with it; a namespace is Terminating until its contents
// are gone. All of it runs under the store's lock.
type registry struct {
	s        *store
	builtins map[schema.GroupVersionResource]*resource
	custom   map[schema.GroupResource]*resource // by group and plural
	// generation counts changes to the served resources, for discovery.
	generation int64
	// emptying are the namespaces and CRDs whose contents are being
	// deleted: a delete inside that pass does not start another.
	emptying map[string]bool
}

func newRegistry(s *store) *registry {
	return &registry{
		s: s, builtins: map[schema.GroupVersionResource]*resource{},
		custom: map[schema.GroupResource]*resource{}, emptying: map[string]bool{},
	}
}

// builtin is the built-in resource gvr; one the table does not know (a
// kind in client-go's scheme the server does not serve) is built from its
// Go type, namespaced unless the table says otherwise.
func (g *registry) builtin(gvr schema.GroupVersionResource) *resource {
	if r, ok := g.builtins[gvr]; ok {
		return r
	}
	r := &resource{gvr: gvr, storage: gvr.Version, namespaced: true}
	if gvr == crdsGVR {
		r.kind, r.namespaced, r.status = "CustomResourceDefinition", false, true
		r.info = builtin.Resource{GVR: gvr, Kind: r.kind, Singular: "customresourcedefinition",
			Verbs:      []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
			ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"},
			Subresources: []builtin.Subresource{{Name: "status", Kind: r.kind, Verbs: []string{"get", "patch", "update"}}}}
	} else if info, ok := builtin.Lookup(gvr); ok {
		r.info, r.kind, r.namespaced = info, info.Kind, info.Namespaced
		r.status = slices.ContainsFunc(info.Subresources, func(s builtin.Subresource) bool { return s.Name == "status" })
	}
	if r.kind != "" {
		if obj, err := apiScheme.New(gvr.GroupVersion().WithKind(r.kind)); err == nil {
			r.goType = reflectType(obj)
		}
	}
	g.builtins[gvr] = r
	return r
}

// forObject is the built-in resource of a typed clientset's request, whose
// GVR the table may not know: its kind then comes from the object.
func (g *registry) forObject(gvr schema.GroupVersionResource, obj runtime.Object) *resource {
	r := g.builtin(gvr)
	if r.goType == nil && obj != nil {
		if gvks, _, err := apiScheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			r.kind, r.goType = gvks[0].Kind, reflectType(obj)
			r.status = hasStatusField(r.goType)
		}
	}
	return r
}

// forKind is a resource of a clientset's list the table does not know,
// built from the kind the list action names.
func (g *registry) forKind(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) *resource {
	r := g.builtin(gvr)
	if r.goType == nil {
		kind := gvk.Kind
		if obj, err := apiScheme.New(gvk); err == nil {
			r.kind, r.goType = kind, reflectType(obj)
			r.status = hasStatusField(r.goType)
		}
	}
	return r
}

// resolve finds what a REST request names: a custom resource in one of its
// served versions, or a built-in resource the server serves.
func (g *registry) resolve(gvr schema.GroupVersionResource) (*resource, error) {
	if r, ok := g.custom[gvr.GroupResource()]; ok && slices.Contains(r.crd.Versions(), gvr.Version) {
		return r, nil
	}
	if _, ok := builtin.Lookup(gvr); ok || gvr == crdsGVR {
		return g.builtin(gvr), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
}

// customResources are the served custom resources, for discovery.
func (g *registry) customResources() []*resource {
	out := make([]*resource, 0, len(g.custom))
	for _, r := range g.custom {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *resource) int { return strings.Compare(a.gvr.String(), b.gvr.String()) })
	return out
}

// beforeCreate completes and checks an object the API server treats
// specially on create.
func (g *registry) beforeCreate(ctx context.Context, r *resource, obj runtime.Object) error {
	switch o := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		crd.Default(o)
		if errs := crd.Validate(ctx, o, nil); len(errs) > 0 {
			return apierrors.NewInvalid(r.groupKind(), o.Name, errs)
		}
		if _, err := crd.New(o); err != nil {
			return apierrors.NewInvalid(r.groupKind(), o.Name, field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())})
		}
		if taken, ok := g.custom[schema.GroupResource{Group: o.Spec.Group, Resource: o.Spec.Names.Plural}]; ok && taken.crdObj.Name != o.Name {
			return apierrors.NewConflict(r.groupResource(), o.Name, fmt.Errorf("%s is already served", o.Spec.Names.Plural))
		}
		o.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		if !slices.Contains(o.Finalizers, crdCleanupFinalizer) {
			o.Finalizers = append(o.Finalizers, crdCleanupFinalizer)
		}
	case *corev1.Namespace:
		if !slices.Contains(o.Spec.Finalizers, corev1.FinalizerKubernetes) {
			o.Spec.Finalizers = append(o.Spec.Finalizers, corev1.FinalizerKubernetes)
		}
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	}
	return nil
}

// beforeUpdate checks an update the API server treats specially.
func (g *registry) beforeUpdate(ctx context.Context, r *resource, out, stored runtime.Object) error {
	if o, ok := out.(*apiextensionsv1.CustomResourceDefinition); ok {
		if errs := crd.Validate(ctx, o, stored.(*apiextensionsv1.CustomResourceDefinition)); len(errs) > 0 {
			return apierrors.NewInvalid(r.groupKind(), o.Name, errs)
		}
	}
	return nil
}

// admitNamespace refuses, as the NamespaceLifecycle admission plug-in
// does, a create in a namespace that does not exist or is terminating.
func (g *registry) admitNamespace(r *resource, ns string) error {
	if !r.namespaced {
		return nil
	}
	obj, ok := g.s.tables[namespacesGVR][objKey{"", ns}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
	}
	if obj.(*corev1.Namespace).DeletionTimestamp != nil {
		return apierrors.NewForbidden(r.groupResource(), "",
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// holds: something besides metadata.finalizers keeps obj from going at
// once when deleted: a namespace's spec.finalizers.
func (g *registry) holds(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// marking completes an object being marked for deletion.
func (g *registry) marking(obj runtime.Object) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
}

// afterWrite plays what follows a stored write: a new CRD is established
// and served; a CRD or namespace being deleted has its contents deleted.
func (g *registry) afterWrite(ctx context.Context, obj runtime.Object) {
	switch o := obj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		if o.DeletionTimestamp != nil {
			g.deleteCustomResources(ctx, o)
			return
		}
		g.serve(ctx, o)
	case *corev1.Namespace:
		if o.DeletionTimestamp != nil {
			g.emptyNamespace(ctx, o.Name)
		}
	}
}

// afterDelete plays what follows an object's removal: a deleted CRD stops
// being served; the last resource of a deleted CRD or namespace lets it go.
func (g *registry) afterDelete(ctx context.Context, r *resource, obj runtime.Object) {
	if o, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		gr := schema.GroupResource{Group: o.Spec.Group, Resource: o.Spec.Names.Plural}
		if served, ok := g.custom[gr]; ok && served.crdObj.Name == o.Name {
			delete(g.custom, gr)
			delete(g.s.tables, served.gvr)
			g.generation++
			// Its watches end, as the API server ends them.
			for w := range g.s.watchers {
				if w.r == served {
					w.finish()
				}
			}
		}
		return
	}
	m, _ := meta.Accessor(obj)
	if r.crdObj != nil {
		if c, ok := g.s.tables[crdsGVR][objKey{"", r.crdObj.Name}].(*apiextensionsv1.CustomResourceDefinition); ok && c.DeletionTimestamp != nil {
			g.deleteCustomResources(ctx, c)
		}
	}
	if ns := m.GetNamespace(); ns != "" {
		if n, ok := g.s.tables[namespacesGVR][objKey{"", ns}].(*corev1.Namespace); ok && n.DeletionTimestamp != nil {
			g.emptyNamespace(ctx, ns)
		}
	}
}

// serve establishes a stored CRD: its resource is served (or its new
// schema is, on an update) and its status says so.
func (g *registry) serve(ctx context.Context, o *apiextensionsv1.CustomResourceDefinition) {
	kind, err := crd.New(o)
	if err != nil {
		return // checked on create; an update that breaks it keeps the old one
	}
	gr := schema.GroupResource{Group: o.Spec.Group, Resource: o.Spec.Names.Plural}
	r, ok := g.custom[gr]
	if !ok || r.crdObj.Generation != o.Generation || r.crdObj.Name != o.Name {
		r = &resource{
			gvr:        schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource},
			storage:    kind.StorageVersion(),
			kind:       kind.Kind(),
			namespaced: kind.Namespaced(),
			status:     kind.HasStatus(kind.StorageVersion()),
			crd:        kind,
			crdObj:     o,
		}
		g.custom[gr] = r
		g.generation++
	}
	r.crdObj = o
	if established(o) {
		return
	}
	done := crd.Established(o, metav1.NewTime(g.s.clock.Now()))
	crdRes := g.builtin(crdsGVR)
	if _, err := g.s.updateLocked(ctx, crdRes, "", done, "status", o.ResourceVersion, writeOptions{manager: "kube-apiserver"}); err != nil {
		return // a later write of the CRD tries again
	}
}

func established(o *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range o.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// deleteCustomResources deletes the resources of a CRD being deleted, and
// the CRD once none is left.
func (g *registry) deleteCustomResources(ctx context.Context, o *apiextensionsv1.CustomResourceDefinition) {
	guard := "crd/" + o.Name
	if g.emptying[guard] {
		return
	}
	g.emptying[guard] = true
	defer delete(g.emptying, guard)
	r, ok := g.custom[schema.GroupResource{Group: o.Spec.Group, Resource: o.Spec.Names.Plural}]
	if ok && r.crdObj.Name == o.Name {
		for k, obj := range g.s.tables[r.gvr] {
			if m, _ := meta.Accessor(obj); m.GetDeletionTimestamp() == nil {
				_, _ = g.s.deleteLocked(ctx, r, k.ns, k.name, metav1.DeleteOptions{})
			}
		}
		if len(g.s.tables[r.gvr]) > 0 {
			return // finalizers of custom resources hold the CRD
		}
	}
	g.removeFinalizer(ctx, g.builtin(crdsGVR), "", o.Name, crdCleanupFinalizer)
}

// emptyNamespace deletes what a terminating namespace holds, and lets the
// namespace go once nothing is left, as the namespace controller does.
func (g *registry) emptyNamespace(ctx context.Context, ns string) {
	guard := "namespace/" + ns
	if g.emptying[guard] {
		return
	}
	g.emptying[guard] = true
	defer delete(g.emptying, guard)
	for gvr, t := range g.s.tables {
		r := g.resourceOf(gvr)
		if r == nil || !r.namespaced {
			continue
		}
		for k, obj := range t {
			if k.ns != ns {
				continue
			}
			if m, _ := meta.Accessor(obj); m.GetDeletionTimestamp() == nil {
				_, _ = g.s.deleteLocked(ctx, r, k.ns, k.name, metav1.DeleteOptions{})
			}
		}
	}
	for _, t := range g.s.tables {
		for k := range t {
			if k.ns == ns {
				return // still there: its own finalizers or a kubelet hold it
			}
		}
	}
	stored, ok := g.s.tables[namespacesGVR][objKey{"", ns}].(*corev1.Namespace)
	if !ok || len(stored.Spec.Finalizers) == 0 {
		return
	}
	done := *stored
	done.Spec.Finalizers = slices.DeleteFunc(slices.Clone(stored.Spec.Finalizers), func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	_, _ = g.s.updateLocked(ctx, g.builtin(namespacesGVR), "", &done, "finalize", stored.ResourceVersion, writeOptions{manager: "kube-controller-manager"})
}

// resourceOf is the resource whose table is gvr.
func (g *registry) resourceOf(gvr schema.GroupVersionResource) *resource {
	if gvr.Version == "" {
		return g.custom[gvr.GroupResource()]
	}
	return g.builtins[gvr]
}

func (g *registry) removeFinalizer(ctx context.Context, r *resource, ns, name, finalizer string) {
	stored, err := g.s.lookup(r, ns, name)
	if err != nil {
		return
	}
	out := shallowCopy(stored)
	m, _ := meta.Accessor(out)
	m.SetFinalizers(slices.DeleteFunc(slices.Clone(m.GetFinalizers()), func(f string) bool { return f == finalizer }))
	_, _ = g.s.updateLocked(ctx, r, ns, out, "", m.GetResourceVersion(), writeOptions{manager: "kube-apiserver"})
}
