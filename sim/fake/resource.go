package fake

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-lab/converge/sim/fake/internal/apply"
	"github.com/converge-lab/converge/sim/fake/internal/builtin"
	"github.com/converge-lab/converge/sim/fake/internal/crd"
)

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
	crdsGVR       = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
)

// apiScheme holds every built-in type the store serves: client-go's
// scheme and the CustomResourceDefinition API.
var apiScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the schemes are fixed at build time
		}
	}
	return s
}()

// resource is one served resource: a built-in kind (typed objects) or a
// custom resource (unstructured), with what its writes need.
type resource struct {
	gvr        schema.GroupVersionResource // its table; no version for custom resources
	storage    string                      // the version objects are stored in
	kind       string
	namespaced bool
	status     bool // writes to status go through the status subresource only
	goType     reflect.Type
	info       builtin.Resource // discovery, for built-ins
	crd        *crd.Kind        // for custom resources
	crdObj     *apiextensionsv1.CustomResourceDefinition

	applyOnce sync.Once
	applier   *apply.Manager
	applyErr  error
}

func (r *resource) typed() bool { return r.goType != nil }

func (r *resource) groupResource() schema.GroupResource { return r.gvr.GroupResource() }

func (r *resource) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}
}

// newObject is an empty object of the kind, in version.
func (r *resource) newObject(version string) runtime.Object {
	if r.typed() {
		return reflect.New(r.goType).Interface().(runtime.Object)
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.gvr.Group, Version: version, Kind: r.kind})
	return u
}

// checkKind refuses an object of another kind than the resource's.
func (r *resource) checkKind(obj runtime.Object) error {
	if r.typed() {
		if t := reflect.TypeOf(obj); t.Kind() != reflect.Pointer || t.Elem() != r.goType {
			return apierrors.NewBadRequest(fmt.Sprintf("%s: got a %T, want a %v", r.gvr.Resource, obj, r.goType))
		}
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("%s: got a %T, want an unstructured object", r.gvr.Resource, obj))
	}
	gvk := u.GroupVersionKind()
	if gvk.Group != r.gvr.Group || gvk.Kind != r.kind || !slices.Contains(r.crd.Versions(), gvk.Version) {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version or kind %s", u.GetAPIVersion(), r.groupKind()))
	}
	return nil
}

// admit prunes, defaults and validates a custom resource against its CRD,
// in the version it was sent in, and stores it in the storage version.
// Built-in kinds are checked on their metadata only.
func (r *resource) admit(ctx context.Context, obj, old runtime.Object) error {
	if r.typed() {
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	var ou *unstructured.Unstructured
	if old != nil {
		ou = old.(*unstructured.Unstructured)
	}
	version := u.GroupVersionKind().Version
	if errs := r.crd.Admit(ctx, version, u, ou); len(errs) > 0 {
		return apierrors.NewInvalid(r.groupKind(), u.GetName(), errs)
	}
	u.SetAPIVersion(schema.GroupVersion{Group: r.gvr.Group, Version: r.storage}.String())
	return nil
}

func reflectType(obj runtime.Object) reflect.Type { return reflect.TypeOf(obj).Elem() }

// applyManager is the resource's server-side apply, built on first use:
// the built-in schema takes a tenth of a second to parse.
func (r *resource) applyManager() (*apply.Manager, error) {
	r.applyOnce.Do(func() {
		if r.typed() {
			r.applier, r.applyErr = apply.ForBuiltin(r.gvr.GroupVersion().WithKind(r.kind))
		} else {
			r.applier, r.applyErr = apply.ForCRD(r.crdObj, r.storage)
		}
	})
	return r.applier, r.applyErr
}

// track records a write in metadata.managedFields, as the API server's
// field manager does, for objects server-side apply has touched (they
// carry managedFields); others are left without, which is cheaper and
// what a controller that never applies cannot tell apart.
func (r *resource) track(ctx context.Context, stored, out runtime.Object, o writeOptions, subresource string) error {
	if o.applied {
		return nil
	}
	om, _ := meta.Accessor(out)
	if stored == nil || len(om.GetManagedFields()) == 0 {
		if stored == nil {
			return nil
		}
		if sm, _ := meta.Accessor(stored); len(sm.GetManagedFields()) == 0 {
			return nil
		}
	}
	m, err := r.applyManager()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	tracked, err := m.Update(ctx, stored, out, o.manager, subresource)
	if err != nil {
		return err
	}
	if stored != nil {
		// An unchanged object keeps its times, so the write stays a no-op.
		if tracked, err = apply.KeepTimestamps(ctx, tracked, stored); err != nil {
			return err
		}
	}
	tm, _ := meta.Accessor(tracked)
	om.SetManagedFields(tm.GetManagedFields())
	return nil
}

// matches: obj is selected by label and field.
func (r *resource) matches(obj runtime.Object, label labels.Selector, field fields.Selector) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !label.Empty() && !label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if field.Empty() {
		return true
	}
	return field.Matches(r.fieldSet(obj, m))
}

// fieldSet is what field selectors match on: metadata.name and
// metadata.namespace for every kind, and the fields the API server
// indexes for a few built-in kinds.
func (r *resource) fieldSet(obj runtime.Object, m metav1Object) fields.Set {
	set := fields.Set{"metadata.name": m.GetName()}
	if r.namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		set["spec.schedulerName"] = o.Spec.SchedulerName
		set["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		set["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		set["status.phase"] = string(o.Status.Phase)
		set["status.podIP"] = o.Status.PodIP
		set["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Namespace:
		set["status.phase"] = string(o.Status.Phase)
	case *corev1.Secret:
		set["type"] = string(o.Type)
	case *corev1.Event:
		set["involvedObject.kind"] = o.InvolvedObject.Kind
		set["involvedObject.namespace"] = o.InvolvedObject.Namespace
		set["involvedObject.name"] = o.InvolvedObject.Name
		set["involvedObject.uid"] = string(o.InvolvedObject.UID)
		set["involvedObject.apiVersion"] = o.InvolvedObject.APIVersion
		set["involvedObject.resourceVersion"] = o.InvolvedObject.ResourceVersion
		set["involvedObject.fieldPath"] = o.InvolvedObject.FieldPath
		set["reason"] = o.Reason
		set["reportingComponent"] = o.ReportingController
		set["source"] = o.Source.Component
		set["type"] = o.Type
	case *corev1.Service:
		set["spec.clusterIP"] = o.Spec.ClusterIP
		set["spec.type"] = string(o.Spec.Type)
	}
	return set
}

type metav1Object = interface {
	GetName() string
	GetNamespace() string
}

// parseFieldSelector parses a field selector and refuses, as the API
// server does, a field the resource cannot select on.
func (r *resource) parseFieldSelector(s string) (fields.Selector, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if sel.Empty() {
		return sel, nil
	}
	known := r.fieldSet(r.newObject(r.storage), &unstructured.Unstructured{})
	for _, req := range sel.Requirements() {
		if _, ok := known[req.Field]; !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return sel, nil
}
