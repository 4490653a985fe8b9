package fake

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// server is the realism layer: it answers every request of the clientsets
// it is installed in, over one object tracker, with the semantics of an API
// server that client-go's fake lacks. All writes go through it under one
// lock, so the resourceVersion counter, the tracker and the watch history
// always agree.
type server struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	tracker   k8stesting.ObjectTracker
	rv        int64
	history   []event // history[head:] are the writes after compacted, oldest first
	head      int     // trimmed events at the front of history, dropped in batches
	limit     int     // history kept; older watches get 410
	compacted int64   // watches from at or below this resourceVersion get 410
	watchers  map[*watcher]struct{}
	closed    bool
}

// event is one write, as a watch delivers it.
type event struct {
	rv   int64
	gvr  schema.GroupVersionResource
	ns   string
	typ  watch.EventType
	obj  runtime.Object // the object after the write (before it, for DELETED)
	prev runtime.Object // the object before the write, nil for ADDED
}

func newServer(clk clock.PassiveClock, historyLimit int) *server {
	return &server{
		clock:    clk,
		tracker:  k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder()),
		limit:    historyLimit,
		watchers: map[*watcher]struct{}{},
	}
}

// install makes s answer every request of cs, ahead of the fake's own
// tracker (which stays empty).
func (s *server) install(cs *k8stesting.Fake) {
	cs.PrependReactor("*", "*", s.react)
	cs.PrependWatchReactor("*", s.watch)
}

func (s *server) react(action k8stesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true, nil, apierrors.NewServiceUnavailable("the fake backend is stopped")
	}
	gvr, ns := action.GetResource(), action.GetNamespace()
	// By verb, not by type: an update action satisfies CreateAction too.
	switch action.GetVerb() {
	case "get":
		obj, err := s.tracker.Get(gvr, ns, action.(k8stesting.GetAction).GetName())
		return true, obj, err
	case "list":
		return s.list(action.(k8stesting.ListAction))
	case "create":
		a := action.(k8stesting.CreateAction)
		if a.GetSubresource() == "binding" {
			return s.bind(a)
		}
		if a.GetSubresource() != "" {
			return true, nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "create "+a.GetSubresource())
		}
		obj, err := s.create(gvr, ns, a.GetObject())
		return true, obj, err
	case "update":
		a := action.(k8stesting.UpdateAction)
		obj, err := s.update(gvr, ns, a.GetObject(), a.GetSubresource(), "")
		return true, obj, err
	case "patch":
		return s.patch(action.(k8stesting.PatchAction))
	case "delete":
		a := action.(k8stesting.DeleteAction)
		obj, err := s.delete(gvr, ns, a.GetName(), a.GetDeleteOptions())
		return true, obj, err
	case "delete-collection":
		list, err := s.tracker.List(gvr, gvr.GroupVersion().WithKind(""), ns)
		if err != nil {
			return true, nil, err
		}
		items, _ := meta.ExtractList(list)
		for _, item := range items {
			m, _ := meta.Accessor(item)
			if _, err := s.delete(gvr, ns, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return true, nil, err
			}
		}
		return true, nil, nil
	}
	return true, nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), action.GetVerb())
}

func (s *server) list(a k8stesting.ListAction) (bool, runtime.Object, error) {
	impl, ok := a.(k8stesting.ListActionImpl)
	if !ok {
		return true, nil, fmt.Errorf("fake backend: unexpected list action %T", a)
	}
	list, err := s.tracker.List(a.GetResource(), impl.GetKind(), a.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	if l, err := meta.ListAccessor(list); err == nil {
		l.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	}
	return true, list, nil
}

func (s *server) next() string {
	s.rv++
	return strconv.FormatInt(s.rv, 10)
}

func (s *server) create(gvr schema.GroupVersionResource, ns string, in runtime.Object) (runtime.Object, error) {
	obj := in.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if ns != "" {
		m.SetNamespace(ns)
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(generateName(m.GetGenerateName(), s.rv+1))
	}
	// Before anything is stored or emitted: a refused create leaves no trace.
	if errs := validateCreate(gvr.GroupResource(), m); len(errs) > 0 {
		return nil, apierrors.NewInvalid(kindOf(obj).GroupKind(), m.GetName(), errs)
	}
	if _, err := s.tracker.Get(gvr, m.GetNamespace(), m.GetName()); err == nil {
		return nil, apierrors.NewAlreadyExists(gvr.GroupResource(), m.GetName())
	}
	m.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", gvr.Resource, s.rv+1)))
	m.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	m.SetGeneration(1)
	m.SetDeletionTimestamp(nil)
	m.SetResourceVersion(s.next())
	if p, ok := obj.(*corev1.Pod); ok {
		// As the API server's pod strategy does.
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	}
	if err := s.tracker.Create(gvr, obj, m.GetNamespace()); err != nil {
		return nil, err
	}
	s.emit(gvr, m.GetNamespace(), watch.Added, obj, nil)
	return obj.DeepCopyObject(), nil
}

// update stores in over the current object. subresource "status" changes
// only the status; the main resource changes all but the status. precondition,
// when set, is the resourceVersion the write must be based on; otherwise the
// one in the object is, when set.
func (s *server) update(gvr schema.GroupVersionResource, ns string, in runtime.Object, subresource, precondition string) (runtime.Object, error) {
	m, err := meta.Accessor(in)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if ns == "" {
		ns = m.GetNamespace()
	}
	stored, err := s.tracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return nil, err
	}
	sm, _ := meta.Accessor(stored)
	if precondition == "" {
		precondition = m.GetResourceVersion()
	}
	if precondition != "" && precondition != sm.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if subresource != "" && subresource != "status" {
		return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "update "+subresource)
	}

	out, err := merge(stored, in, subresource == "status")
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	om, _ := meta.Accessor(out)
	// What the client cannot change.
	om.SetNamespace(sm.GetNamespace())
	om.SetUID(sm.GetUID())
	om.SetCreationTimestamp(sm.GetCreationTimestamp())
	om.SetDeletionTimestamp(sm.GetDeletionTimestamp())
	om.SetDeletionGracePeriodSeconds(sm.GetDeletionGracePeriodSeconds())
	om.SetGeneration(sm.GetGeneration())
	if subresource == "" && specChanged(stored, out) {
		om.SetGeneration(sm.GetGeneration() + 1)
	}
	if apiequality.Semantic.DeepEqual(stored, withRV(out, sm.GetResourceVersion())) {
		return stored, nil // a no-op write changes nothing, not even the resourceVersion
	}
	om.SetResourceVersion(s.next())
	if om.GetDeletionTimestamp() != nil && len(om.GetFinalizers()) == 0 {
		if err := s.tracker.Delete(gvr, ns, om.GetName()); err != nil {
			return nil, err
		}
		s.emit(gvr, ns, watch.Deleted, out, stored)
		return out.DeepCopyObject(), nil
	}
	if err := s.tracker.Update(gvr, out, ns); err != nil {
		return nil, err
	}
	s.emit(gvr, ns, watch.Modified, out, stored)
	return out.DeepCopyObject(), nil
}

func (s *server) patch(a k8stesting.PatchAction) (bool, runtime.Object, error) {
	gvr, ns := a.GetResource(), a.GetNamespace()
	stored, err := s.tracker.Get(gvr, ns, a.GetName())
	if err != nil {
		return true, nil, err
	}
	orig, err := json.Marshal(stored)
	if err != nil {
		return true, nil, err
	}
	var patched []byte
	switch a.GetPatchType() {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(a.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		patched, err = p.Apply(orig)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
	case types.MergePatchType:
		if patched, err = jsonpatch.MergePatch(orig, a.GetPatch()); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		if patched, err = strategicpatch.StrategicMergePatch(orig, a.GetPatch(), stored); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return true, nil, apierrors.NewBadRequest("the fake backend does not support patch type " + string(a.GetPatchType()))
	}
	out := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, out); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	// A patch is conditional only when it names a resourceVersion itself.
	om, _ := meta.Accessor(out)
	sm, _ := meta.Accessor(stored)
	precondition := sm.GetResourceVersion()
	if om.GetResourceVersion() != sm.GetResourceVersion() {
		precondition = om.GetResourceVersion()
	}
	obj, err := s.update(gvr, ns, out, a.GetSubresource(), precondition)
	return true, obj, err
}

func (s *server) delete(gvr schema.GroupVersionResource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	stored, err := s.tracker.Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	sm, _ := meta.Accessor(stored)
	if pre := opts.Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != sm.GetUID() || pre.ResourceVersion != nil && *pre.ResourceVersion != sm.GetResourceVersion() {
			return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("precondition failed"))
		}
	}
	grace := gracePeriod(stored, opts)
	if grace == 0 && len(sm.GetFinalizers()) == 0 {
		if err := s.tracker.Delete(gvr, ns, name); err != nil {
			return nil, err
		}
		final := stored.DeepCopyObject()
		fm, _ := meta.Accessor(final)
		fm.SetResourceVersion(s.next())
		s.emit(gvr, ns, watch.Deleted, final, stored)
		return final, nil
	}
	if sm.GetDeletionTimestamp() != nil {
		return stored, nil // already terminating
	}
	// Graceful: mark it; the kubelet (or whoever holds a finalizer) finishes.
	out := stored.DeepCopyObject()
	om, _ := meta.Accessor(out)
	at := metav1.NewTime(s.clock.Now().Add(time.Duration(grace) * time.Second))
	om.SetDeletionTimestamp(&at)
	om.SetDeletionGracePeriodSeconds(&grace)
	om.SetResourceVersion(s.next())
	if err := s.tracker.Update(gvr, out, ns); err != nil {
		return nil, err
	}
	s.emit(gvr, ns, watch.Modified, out, stored)
	return out.DeepCopyObject(), nil
}

// bind is the pods/binding subresource: it sets spec.nodeName once.
func (s *server) bind(a k8stesting.CreateAction) (bool, runtime.Object, error) {
	binding, ok := a.GetObject().(*corev1.Binding)
	if !ok {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("binding: unexpected %T", a.GetObject()))
	}
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	ns := a.GetNamespace()
	if ns == "" {
		ns = binding.Namespace
	}
	stored, err := s.tracker.Get(gvr, ns, binding.Name)
	if err != nil {
		return true, nil, err
	}
	pod := stored.(*corev1.Pod).DeepCopy()
	if pod.Spec.NodeName != "" {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), pod.Name,
			fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	if pod.DeletionTimestamp != nil {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), pod.Name, fmt.Errorf("pod %s is being deleted", pod.Name))
	}
	pod.Spec.NodeName = binding.Target.Name
	pod.ResourceVersion = s.next()
	if err := s.tracker.Update(gvr, pod, ns); err != nil {
		return true, nil, err
	}
	s.emit(gvr, ns, watch.Modified, pod, stored)
	return true, nil, nil
}

// gracePeriod is the deletion grace of an object: pods bound to a node get
// the grace the request or the pod asks for (30s by default), since a
// kubelet has to stop them; everything else is deleted at once.
func gracePeriod(obj runtime.Object, opts metav1.DeleteOptions) int64 {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return max(0, *opts.GracePeriodSeconds)
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return max(0, *p.Spec.TerminationGracePeriodSeconds)
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// merge returns the object a write of in over stored produces: for a status
// write, stored with in's status; for a main-resource write, in with
// stored's status (for kinds that have one).
func merge(stored, in runtime.Object, status bool) (runtime.Object, error) {
	su, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return nil, err
	}
	iu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		return nil, err
	}
	var result map[string]any
	if status {
		result = su
		if st, ok := iu["status"]; ok {
			result["status"] = st
		} else {
			delete(result, "status")
		}
	} else {
		result = iu
		if st, ok := su["status"]; ok && hasStatusSubresource(stored) {
			result["status"] = st
		}
	}
	out := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(result, out); err != nil {
		return nil, err
	}
	return out, nil
}

// hasStatusSubresource: the kinds whose status only the status subresource
// writes. Events, ConfigMaps, Leases and the like have none.
func hasStatusSubresource(obj runtime.Object) bool {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	_, hasSpec := u["spec"]
	_, hasStatus := u["status"]
	return hasSpec && hasStatus
}

// specChanged: anything but metadata and status differs.
func specChanged(a, b runtime.Object) bool {
	au, err1 := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	bu, err2 := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err1 != nil || err2 != nil {
		return true
	}
	for _, k := range []string{"metadata", "status", "apiVersion", "kind"} {
		delete(au, k)
		delete(bu, k)
	}
	return !apiequality.Semantic.DeepEqual(au, bu)
}

func withRV(obj runtime.Object, rv string) runtime.Object {
	c := obj.DeepCopyObject()
	m, _ := meta.Accessor(c)
	m.SetResourceVersion(rv)
	return c
}

func kindOf(obj runtime.Object) schema.GroupVersionKind {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}
	}
	return gvks[0]
}
