package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/converge-lab/converge/sim/fake/internal/builtin"
)

// Door 1: client-go's fake clientset. Its reactors hand every request to
// the store, typed objects in and out, so nothing is encoded on the way:
// the fastest path, for controllers that take a kubernetes.Interface.

// install makes s answer every request of cs, ahead of the fake's own
// tracker (which stays empty). With share, cs's watches hand out the
// store's own objects instead of a copy per event.
func (s *store) install(cs *fake.Clientset, share bool) {
	var requests atomic.Int64
	react := func(action k8stesting.Action) (bool, runtime.Object, error) {
		// The clientset keeps a copy of every request it was asked, for
		// tests that read Actions(). A run makes millions: forget them now
		// and then, from outside the clientset's lock, which is held here.
		if requests.Add(1)%forgetActionsEvery == 0 {
			go cs.ClearActions()
		}
		return s.react(action)
	}
	cs.PrependReactor("*", "*", react)
	cs.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		return s.watchReactor(action, !share)
	})
}

// forgetActionsEvery is how many requests a clientset's action log holds
// at most, give or take the ones made while it is being cleared.
const forgetActionsEvery = 4096

// builtinResourceLists are the clientset's discovery: the built-in
// resources, as the API server lists them. Built once: clientsets only
// read them.
var builtinResourceLists = sync.OnceValue(func() []*metav1.APIResourceList {
	var lists []*metav1.APIResourceList
	seen := map[schema.GroupVersion]bool{}
	for _, r := range builtin.All() {
		gv := r.GVR.GroupVersion()
		if seen[gv] {
			continue
		}
		seen[gv] = true
		if l, ok := builtin.APIResourceList(gv, nil); ok {
			lists = append(lists, l)
		}
	}
	return lists
})

func (s *store) react(action k8stesting.Action) (bool, runtime.Object, error) {
	ctx := context.Background()
	gvr, ns := action.GetResource(), action.GetNamespace()
	// By verb, not by type: an update action satisfies CreateAction too.
	switch action.GetVerb() {
	case "get":
		r := s.resourceFor(gvr, nil)
		a, ok := action.(k8stesting.GetAction)
		if !ok {
			return false, nil, nil // the clientset's discovery, answered from its Resources
		}
		obj, err := s.get(r, ns, a.GetName())
		return true, copyOut(obj), err
	case "list":
		a, ok := action.(k8stesting.ListAction)
		if !ok {
			return false, nil, nil
		}
		return s.listReaction(a)
	case "create":
		a, ok := action.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		if a.GetSubresource() == "binding" {
			binding, ok := a.GetObject().(*corev1.Binding)
			if !ok {
				return true, nil, apierrors.NewBadRequest(fmt.Sprintf("binding: unexpected %T", a.GetObject()))
			}
			return true, nil, s.bind(ns, binding)
		}
		if a.GetSubresource() != "" {
			r := s.resourceFor(gvr, a.GetObject())
			return true, nil, apierrors.NewMethodNotSupported(r.groupResource(), "create "+a.GetSubresource())
		}
		r := s.resourceFor(gvr, a.GetObject())
		// The clientset hands each reactor its own copy of the request.
		obj, err := s.create(ctx, r, ns, a.GetObject(), writeOptions{})
		return true, copyOut(obj), err
	case "update":
		a, ok := action.(k8stesting.UpdateAction)
		if !ok {
			return false, nil, nil
		}
		r := s.resourceFor(gvr, a.GetObject())
		obj, err := s.update(ctx, r, ns, a.GetObject(), a.GetSubresource(), "", writeOptions{put: true})
		return true, copyOut(obj), err
	case "patch":
		a, ok := action.(k8stesting.PatchAction)
		if !ok {
			return false, nil, nil
		}
		r := s.resourceFor(gvr, nil)
		if a.GetPatchType() == types.ApplyPatchType {
			var opts metav1.PatchOptions
			if impl, ok := a.(k8stesting.PatchActionImpl); ok {
				opts = impl.PatchOptions
			}
			obj, _, err := s.apply(ctx, r, ns, a.GetName(), a.GetSubresource(), a.GetPatch(), opts.FieldManager, ptrTrue(opts.Force), len(opts.DryRun) > 0)
			return true, copyOut(obj), err
		}
		obj, err := s.patch(ctx, r, ns, a.GetName(), a.GetSubresource(), a.GetPatchType(), a.GetPatch(), writeOptions{})
		return true, copyOut(obj), err
	case "delete":
		a, ok := action.(k8stesting.DeleteAction)
		if !ok {
			return false, nil, nil
		}
		obj, err := s.delete(ctx, s.resourceFor(gvr, nil), ns, a.GetName(), a.GetDeleteOptions())
		return true, copyOut(obj), err
	case "delete-collection":
		a, ok := action.(k8stesting.DeleteCollectionAction)
		if !ok {
			return false, nil, nil
		}
		r := s.resourceFor(gvr, nil)
		lo, err := parseListOptions(r, metav1.ListOptions{LabelSelector: a.GetListRestrictions().Labels.String(), FieldSelector: a.GetListRestrictions().Fields.String()})
		if err != nil {
			return true, nil, err
		}
		return true, nil, s.deleteCollection(ctx, r, ns, lo, metav1.DeleteOptions{})
	}
	return true, nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), action.GetVerb())
}

// resourceFor is the resource of a clientset request, under the store's
// lock (the registry fills its cache lazily).
func (s *store) resourceFor(gvr schema.GroupVersionResource, obj runtime.Object) *resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds.forObject(gvr, obj)
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func copyOut(obj runtime.Object) runtime.Object {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil
	}
	return obj.DeepCopyObject()
}

func (s *store) listReaction(a k8stesting.ListAction) (bool, runtime.Object, error) {
	impl, ok := a.(k8stesting.ListActionImpl)
	if !ok {
		return true, nil, fmt.Errorf("fake backend: unexpected list action %T", a)
	}
	r := s.resourceFor(a.GetResource(), nil)
	if r.goType == nil {
		s.mu.Lock()
		r = s.kinds.forKind(a.GetResource(), impl.GetKind())
		s.mu.Unlock()
	}
	lo, err := parseListOptions(r, metav1.ListOptions{
		LabelSelector:   impl.GetListRestrictions().Labels.String(),
		FieldSelector:   impl.GetListRestrictions().Fields.String(),
		ResourceVersion: impl.ListOptions.ResourceVersion, ResourceVersionMatch: impl.ListOptions.ResourceVersionMatch,
		Limit: impl.ListOptions.Limit, Continue: impl.ListOptions.Continue,
	})
	if err != nil {
		return true, nil, err
	}
	objs, rv, next, err := s.list(r, a.GetNamespace(), lo)
	if err != nil {
		return true, nil, err
	}
	// The action names the item kind.
	listKind := impl.GetKind()
	listKind.Kind += "List"
	list, err := apiScheme.New(listKind)
	if err != nil {
		return true, nil, err
	}
	if err := fillList(list, objs); err != nil {
		return true, nil, err
	}
	if l, err := meta.ListAccessor(list); err == nil {
		l.SetResourceVersion(fmt.Sprint(rv))
		l.SetContinue(next)
	}
	return true, list, nil
}

// fillList sets list's items to copies of objs, each copied straight into
// its place in the Items slice: one copy per item, not two.
func fillList(list runtime.Object, objs []runtime.Object) error {
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !items.IsValid() || items.Kind() != reflect.Slice {
		return fmt.Errorf("fake backend: %T has no Items", list)
	}
	slice := reflect.MakeSlice(items.Type(), len(objs), len(objs))
	for i, obj := range objs {
		in := reflect.ValueOf(obj)
		if in.Type() != slice.Index(i).Addr().Type() {
			return fmt.Errorf("fake backend: a %T in a %T", obj, list)
		}
		in.MethodByName("DeepCopyInto").Call([]reflect.Value{slice.Index(i).Addr()})
	}
	items.Set(slice)
	return nil
}

func (s *store) watchReactor(action k8stesting.Action, copyEach bool) (bool, watch.Interface, error) {
	var opts metav1.ListOptions
	if a, ok := action.(k8stesting.WatchActionImpl); ok {
		opts = a.ListOptions
	}
	r := s.resourceFor(action.GetResource(), nil)
	wo, err := parseWatchOptions(r, opts)
	if err != nil {
		return true, nil, err
	}
	wo.copy = copyEach
	w, err := s.watch(r, action.GetNamespace(), wo)
	if err != nil {
		return true, nil, err
	}
	return true, w, nil
}

// applyPatch returns stored with patch applied, as a new object.
func applyPatch(r *resource, stored runtime.Object, pt types.PatchType, patch []byte) (runtime.Object, error) {
	orig, err := json.Marshal(stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if patched, err = p.Apply(orig); err != nil {
			return nil, statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
		}
	case types.MergePatchType:
		if patched, err = jsonpatch.MergePatch(orig, patch); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		if !r.typed() {
			return nil, statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
		}
		if patched, err = strategicpatch.StrategicMergePatch(orig, patch, stored); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return nil, statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
	}
	out := r.newObject(r.storage)
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}
