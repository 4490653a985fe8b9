package apply

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

// Manager applies and tracks field ownership for one kind in one version.
// It is safe for concurrent use.
type Manager struct {
	gvk     schema.GroupVersionKind
	creater runtime.ObjectCreater
	// bySubresource holds a field manager per subresource the kind has:
	// "" and, with a status subresource, "status". The server builds one per
	// subresource too, because each resets different fields.
	bySubresource map[string]*managedfields.FieldManager
}

// typeInfo is what the field manager needs to know about a kind.
type typeInfo struct {
	gvk           schema.GroupVersionKind
	hasStatus     bool
	typeConverter managedfields.TypeConverter
	convertor     runtime.ObjectConvertor
	defaulter     runtime.ObjectDefaulter
	creater       runtime.ObjectCreater
	crd           bool
}

func newManager(t typeInfo) (*Manager, error) {
	// A main-resource write never owns status, and a status write owns only
	// status, for kinds with a status subresource (the strategies' reset
	// fields).
	resets := map[string][]fieldpath.Path{"": nil}
	if t.hasStatus {
		resets[""] = []fieldpath.Path{fieldpath.MakePathOrDie("status")}
		resets["status"] = []fieldpath.Path{fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec")}
	}
	newFieldManager := managedfields.NewDefaultFieldManager
	if t.crd {
		newFieldManager = managedfields.NewDefaultCRDFieldManager
	}
	m := &Manager{gvk: t.gvk, creater: t.creater, bySubresource: map[string]*managedfields.FieldManager{}}
	for sub, paths := range resets {
		var filter map[fieldpath.APIVersion]fieldpath.Filter
		if len(paths) > 0 {
			filter = fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
				fieldpath.APIVersion(t.gvk.GroupVersion().String()): fieldpath.NewSet(paths...),
			})
		}
		fm, err := newFieldManager(t.typeConverter, t.convertor, t.defaulter, t.creater, t.gvk, t.gvk.GroupVersion(), sub, filter)
		if err != nil {
			return nil, fmt.Errorf("field manager for %v (subresource %q): %w", t.gvk, sub, err)
		}
		m.bySubresource[sub] = fm
	}
	return m, nil
}

// GroupVersionKind is the kind and version the manager serves.
func (m *Manager) GroupVersionKind() schema.GroupVersionKind { return m.gvk }

// Apply performs a server-side apply of patch (application/apply-patch+yaml:
// YAML or JSON) by fieldManager onto live, nil when the object does not exist
// (apply creates). subresource is "" or "status"; force is ?force=true.
//
// The result has live's representation: typed or *unstructured.Unstructured
// as live is (typed, without TypeMeta, when a built-in is created; always
// unstructured for custom resources), with metadata.managedFields updated.
// Every error is an *apierrors.StatusError as the server would answer it: 409
// with a FieldManagerConflict cause per conflicting field, 400 for a patch
// that does not decode or names another apiVersion or kind, 422 for a
// missing or invalid fieldManager, and 500 for a patch that does not fit the
// schema (the server answers that with a 500 too). That the patch's name and
// namespace match the request is the caller's check, as it is the server
// handler's.
func (m *Manager) Apply(ctx context.Context, live runtime.Object, patch []byte, fieldManager, subresource string, force bool) (runtime.Object, error) {
	fm, err := m.fieldManager(subresource)
	if err != nil {
		return nil, err
	}
	opts := &metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	if errs := validation.ValidatePatchOptions(opts, types.ApplyPatchType); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	patchObj, err := decodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	current, err := m.working(live)
	if err != nil {
		return nil, err
	}
	out, err := fm.Apply(current, patchObj, fieldManager, force)
	if err != nil {
		return nil, asStatus(err)
	}
	return m.finish(out, live)
}

// Update records a non-apply write (create, update or patch) of newObj over
// live (nil for a create) by fieldManager, and returns newObj with
// metadata.managedFields set as the server's field manager sets them on every
// write. fieldManager is taken as given: see [DefaultFieldManager] for an
// empty one. subresource is "" or "status"; a status write is recorded with
// subresource "status".
//
// As on the server, a main-resource write that sets managedFields replaces
// live's (a client may edit them) and an empty list clears them, and an
// object the schema cannot read keeps live's managedFields rather than
// failing the write. The only errors are an invalid fieldManager (422,
// naming CreateOptions or UpdateOptions; the server names PatchOptions for a
// patch) and a subresource the kind does not have (404).
func (m *Manager) Update(ctx context.Context, live, newObj runtime.Object, fieldManager, subresource string) (runtime.Object, error) {
	fm, err := m.fieldManager(subresource)
	if err != nil {
		return nil, err
	}
	if errs := validation.ValidateFieldManager(fieldManager, field.NewPath("fieldManager")); len(errs) > 0 {
		kind := "UpdateOptions"
		if live == nil {
			kind = "CreateOptions"
		}
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	current, err := m.working(live)
	if err != nil {
		return nil, err
	}
	written, err := m.working(newObj)
	if err != nil {
		return nil, err
	}
	out, err := fm.Update(current, written, fieldManager)
	if err != nil {
		// The server never fails a write over managedFields: it keeps the
		// live ones and lets validation judge the object.
		out = written
		if err := setManagedFields(out, current); err != nil {
			return nil, err
		}
	}
	return m.finish(out, newObj)
}

// DefaultFieldManager is the manager the server records for a non-apply
// write: fieldManager, or when empty the user agent up to its first "/",
// printable characters only, at most 128 bytes ("kubectl/v1.37.2 (linux)"
// gives "kubectl"). Apply has no default: its fieldManager is required.
func DefaultFieldManager(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	name, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range name {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// decodePatch reads an apply patch with whole numbers as int64, as the
// server's objects have them once stored and read back; a plain YAML decode
// would leave float64s in custom resources.
func decodePatch(patch []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(patch)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if err := utiljson.Unmarshal(js, &obj.Object); err != nil {
		return nil, err
	}
	return obj, nil
}

func (m *Manager) fieldManager(subresource string) (*managedfields.FieldManager, error) {
	fm, ok := m.bySubresource[subresource]
	if !ok {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusNotFound,
			Reason:  metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("%s has no %q subresource here", m.gvk.Kind, subresource),
		}}
	}
	return fm, nil
}

// working returns the copy of obj the field manager may change (it sets
// apiVersion and kind in place, and an Update rewrites managedFields), or a
// new empty object for nil as the server passes for a create.
func (m *Manager) working(obj runtime.Object) (runtime.Object, error) {
	if obj == nil {
		out, err := m.creater.New(m.gvk)
		if err != nil {
			return nil, err
		}
		out.GetObjectKind().SetGroupVersionKind(m.gvk)
		return out, nil
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() && gvk != m.gvk {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("object is a %v, not a %v", gvk, m.gvk))
	}
	out := obj.DeepCopyObject()
	out.GetObjectKind().SetGroupVersionKind(m.gvk)
	return out, nil
}

// finish gives out the representation of like (typed or unstructured, with
// or without TypeMeta) and truncates timestamps to the second, as a client
// reading from a real server sees them.
func (m *Manager) finish(out, like runtime.Object) (runtime.Object, error) {
	out, err := m.represent(out, like)
	if err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(out)
	if err != nil {
		return nil, err
	}
	entries := acc.GetManagedFields()
	for i := range entries {
		if t := entries[i].Time; t != nil {
			entries[i].Time = &metav1.Time{Time: t.Truncate(time.Second)}
		}
	}
	acc.SetManagedFields(entries)
	return out, nil
}

// KeepTimestamps returns newObj with live's managedFields timestamps when
// the timestamps are all that differ, so that a write that changes nothing
// else changes nothing (no new resourceVersion, no watch event). Call it
// where the server's store does: after the write's own changes (status
// reset, defaulting), before deciding whether the object changed. Apply and
// Update cannot do it themselves: they see the object before those changes.
// newObj may be modified.
func KeepTimestamps(ctx context.Context, newObj, live runtime.Object) (runtime.Object, error) {
	out, err := fieldmanager.IgnoreManagedFieldsTimestampsTransformer(ctx, newObj, live)
	if err != nil {
		return nil, asStatus(err)
	}
	return out, nil
}

func (m *Manager) represent(out, like runtime.Object) (runtime.Object, error) {
	if _, ok := like.(*unstructured.Unstructured); ok {
		if _, ok := out.(*unstructured.Unstructured); ok {
			return out, nil
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
		if err != nil {
			return nil, err
		}
		res := &unstructured.Unstructured{Object: u}
		res.SetGroupVersionKind(m.gvk)
		return res, nil
	}
	if _, ok := out.(*unstructured.Unstructured); ok {
		return out, nil
	}
	var gvk schema.GroupVersionKind
	if like != nil {
		gvk = like.GetObjectKind().GroupVersionKind()
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

// setManagedFields gives obj the managedFields of from.
func setManagedFields(obj, from runtime.Object) error {
	dst, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	src, err := meta.Accessor(from)
	if err != nil {
		return err
	}
	dst.SetManagedFields(src.GetManagedFields())
	return nil
}

// asStatus answers err the way the server's response writer does: a status
// error as it is, anything else as a 500 carrying the message.
func asStatus(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}}
}
