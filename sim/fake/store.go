package fake

//lint:file-ignore ST1005 precondition failures read as kube-apiserver writes them

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/converge-lab/converge/internal/bounded"
)

// store is the in-memory API's state: one resourceVersion counter, one
// table of objects per resource, one write history and one set of watchers,
// for built-in kinds (typed objects) and custom resources (unstructured)
// alike. Both doors call it under its lock, so the counter, the tables and
// the history always agree.
//
// Stored objects are never changed in place: a write stores a new object,
// so the history and the tables share them, and only what leaves the store
// (a clientset's answer, a watch event) is copied or encoded.
type store struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	rv        int64
	tables    map[schema.GroupVersionResource]map[objKey]runtime.Object
	kinds     *registry
	history   ring  // the writes after compacted, oldest first
	limit     int   // history kept; older watches get 410
	compacted int64 // watches from at or below this resourceVersion get 410
	watchers  map[*watcher]struct{}
	owners    owners
	gc        *collector
	gcStarted bool
	closed    bool
	// generated counts the names made from each generateName, by
	// resource and namespace.
	generated map[generatedKey]int64
	// created counts the objects created under each name, so that one
	// made again under a name has a uid of its own (uidOf).
	created map[createdKey]int64
	// encoded are the objects REST watches sent last, encoded (encode).
	encoded bounded.Map[encodingKey, []byte]
}

type createdKey struct {
	gvr schema.GroupVersionResource
	objKey
}

// uidOf is the uid of the nth object created under k: shaped as an API
// server's (a version 4 UUID) but drawn from k and n, not at random, so
// that a seeded run keeps its uids whatever order concurrent writers
// took, and objects share no prefix (a controller may name a child after
// its owner's uid's first characters).
func uidOf(k createdKey, n int64) types.UID {
	data := fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d", k.gvr, k.ns, k.name, n)
	return types.UID(uuid.NewHash(sha256.New(), uuid.Nil, data, 4).String())
}

type generatedKey struct {
	gvr      schema.GroupVersionResource
	ns, base string
}

type objKey struct{ ns, name string }

func (k objKey) String() string { return k.ns + "/" + k.name }

func compareKeys(a, b objKey) int {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

func sortKeys(keys []objKey) { slices.SortFunc(keys, compareKeys) }

func fieldErrors(path, msg string) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(path), msg)}
}

// event is one write, as a watch delivers it. obj and prev are stored
// objects: shared, never changed.
type event struct {
	rv   int64
	gvr  schema.GroupVersionResource
	ns   string
	typ  watch.EventType
	obj  runtime.Object // the object after the write (before it, for DELETED)
	prev runtime.Object // the object before the write, nil for ADDED
}

func newStore(clk clock.PassiveClock, historyLimit int) *store {
	s := &store{
		clock:    clk,
		tables:   map[schema.GroupVersionResource]map[objKey]runtime.Object{},
		limit:    historyLimit,
		watchers: map[*watcher]struct{}{},
		owners:   newOwners(),
		gc:       newCollector(),

		generated: map[generatedKey]int64{},
		created:   map[createdKey]int64{},
		encoded:   bounded.Map[encodingKey, []byte]{Limit: encodingsKept},
	}
	s.kinds = newRegistry(s)
	return s
}

// generateName names an object of gvr in ns after its generateName base:
// the base and the count of names made from it so far, skipping one taken.
// The count is the base's own, not the store's writes, so that an object's
// name does not depend on the order in which concurrent writers' creates of
// other objects arrived: a run with a seed draws its faults for the same
// names (the draws are keyed by name), whatever the goroutines did.
func (s *store) generateName(gvr schema.GroupVersionResource, ns, base string) string {
	k := generatedKey{gvr, ns, base}
	for {
		s.generated[k]++
		name := generateName(base, s.generated[k])
		if _, taken := s.tables[gvr][objKey{ns, name}]; !taken {
			return name
		}
	}
}

func errStopped() error { return apierrors.NewServiceUnavailable("the fake backend is stopped") }

func (s *store) next() string {
	s.rv++
	return strconv.FormatInt(s.rv, 10)
}

func (s *store) table(r *resource) map[objKey]runtime.Object {
	t := s.tables[r.gvr]
	if t == nil {
		t = map[objKey]runtime.Object{}
		s.tables[r.gvr] = t
	}
	return t
}

func (s *store) lookup(r *resource, ns, name string) (runtime.Object, error) {
	obj, ok := s.tables[r.gvr][objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(r.groupResource(), name)
	}
	return obj, nil
}

// get returns the stored object: the caller copies or encodes it.
func (s *store) get(r *resource, ns, name string) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	return s.lookup(r, ns, name)
}

// listOptions are the parts of metav1.ListOptions a list honours.
type listOptions struct {
	label    labels.Selector
	field    fields.Selector
	limit    int64
	cont     string
	rv       string
	rvMatch  metav1.ResourceVersionMatch
	snapshot bool // resourceVersion names a point in the past to read at
}

func parseListOptions(r *resource, o metav1.ListOptions) (listOptions, error) {
	label, err := labels.Parse(o.LabelSelector)
	if err != nil {
		return listOptions{}, apierrors.NewBadRequest(err.Error())
	}
	fsel, err := r.parseFieldSelector(o.FieldSelector)
	if err != nil {
		return listOptions{}, err
	}
	if o.Limit < 0 {
		return listOptions{}, apierrors.NewBadRequest(fmt.Sprintf("limit must not be negative, got %d", o.Limit))
	}
	lo := listOptions{label: label, field: fsel, limit: o.Limit, cont: o.Continue, rv: o.ResourceVersion, rvMatch: o.ResourceVersionMatch}
	switch lo.rvMatch {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
	default:
		return listOptions{}, apierrors.NewBadRequest(fmt.Sprintf("unknown resourceVersionMatch %q", lo.rvMatch))
	}
	if lo.rvMatch != "" && lo.rv == "" {
		return listOptions{}, invalid(r, "", field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if lo.cont != "" && lo.rv != "" && lo.rv != "0" {
		return listOptions{}, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	lo.snapshot = lo.rvMatch == metav1.ResourceVersionMatchExact
	return lo, nil
}

func invalid(r *resource, name string, path *field.Path, msg string) error {
	return apierrors.NewInvalid(r.groupKind(), name, field.ErrorList{field.Invalid(path, nil, msg)})
}

// continueToken is where a paginated list resumes: the snapshot it reads
// and the key after which it goes on.
type continueToken struct {
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

func encodeContinue(t continueToken) string {
	data, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(data, &t)
	}
	if err != nil || t.RV <= 0 || !strings.Contains(t.Start, "/") {
		return continueToken{}, apierrors.NewBadRequest("invalid continue token")
	}
	return t, nil
}

// statusError is an API error with a code and reason apierrors has no
// constructor for.
func statusError(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

// list returns the objects of r in ns that match o, sorted by namespace
// and name as a real server lists them, and the list's resourceVersion and
// continue token. A continue token, or resourceVersionMatch=Exact, reads
// the table as it was at that resourceVersion, rebuilt from the history;
// older than the history is 410 Expired, as after an etcd compaction.
func (s *store) list(r *resource, ns string, o listOptions) ([]runtime.Object, int64, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, "", errStopped()
	}
	at := s.rv
	var start objKey
	var startSet bool
	switch {
	case o.cont != "":
		tok, err := decodeContinue(o.cont)
		if err != nil {
			return nil, 0, "", err
		}
		at = tok.RV
		ns2, name, _ := strings.Cut(tok.Start, "/")
		start, startSet = objKey{ns2, name}, true
	case o.rv != "" && o.rv != "0":
		n, err := strconv.ParseInt(o.rv, 10, 64)
		if err != nil {
			return nil, 0, "", apierrors.NewBadRequest("invalid resourceVersion " + strconv.Quote(o.rv))
		}
		if n > s.rv {
			return nil, 0, "", apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", n, s.rv), 1)
		}
		if o.snapshot {
			at = n
		}
	}
	objs, err := s.snapshot(r, ns, at)
	if err != nil {
		return nil, 0, "", err
	}
	keys := make([]objKey, 0, len(objs))
	for k := range objs {
		if startSet && compareKeys(k, start) <= 0 {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	var out []runtime.Object
	next := ""
	for i, k := range keys {
		obj := objs[k]
		if !r.matches(obj, o.label, o.field) {
			continue
		}
		if o.limit > 0 && int64(len(out)) == o.limit {
			// More may match: a real server answers with a token
			// whenever it stopped early.
			next = encodeContinue(continueToken{RV: at, Start: keys[i-1].String()})
			break
		}
		out = append(out, obj)
	}
	return out, at, next, nil
}

// snapshot is r's table in ns (all namespaces when empty) as it was at
// resourceVersion at: the current table with every later write undone.
// Callers hold s.mu and do not change the map when at is now.
func (s *store) snapshot(r *resource, ns string, at int64) (map[objKey]runtime.Object, error) {
	current := s.tables[r.gvr]
	if at == s.rv && ns == "" {
		return current, nil
	}
	if at < s.compacted {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("The resourceVersion for the provided list is too old (%d, compacted at %d).", at, s.compacted))
	}
	objs := make(map[objKey]runtime.Object, len(current))
	for k, obj := range current {
		if ns == "" || k.ns == ns {
			objs[k] = obj
		}
	}
	if at == s.rv {
		return objs, nil
	}
	for i := s.history.len() - 1; i >= 0 && s.history.at(i).rv > at; i-- {
		e := s.history.at(i)
		if e.gvr != r.gvr || ns != "" && e.ns != ns {
			continue
		}
		m, _ := meta.Accessor(e.obj)
		k := objKey{e.ns, m.GetName()}
		if e.prev == nil {
			delete(objs, k)
		} else {
			objs[k] = e.prev
		}
	}
	return objs, nil
}

// create stores obj, which the store now owns. Before anything is stored
// or emitted, the object is checked: a refused create leaves no trace.
func (s *store) create(ctx context.Context, r *resource, ns string, obj runtime.Object, o writeOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	return s.createLocked(ctx, r, ns, obj, o)
}

// writeOptions are what a write request says besides its object.
type writeOptions struct {
	manager string // fieldManager
	dryRun  bool
	put     bool // a PUT, as opposed to a patch or an apply
	applied bool // managedFields already computed by server-side apply
}

// eventName is the name an Event is stored under: name, unless an Event
// of that name exists and name is what a client-go event recorder makes
// of its object's name and this instant ("shop.18ef0ba7633c6658", the
// clock's nanoseconds in hex). Then it is the name the recorder would
// have made a nanosecond later, or the first free one after it: in
// virtual time every Event recorded in one instant reads the same clock,
// which two Events recorded in real time never do, and a real API server
// stores each of them.
func (s *store) eventName(r *resource, ns, name string) string {
	if r.gvr.Resource != "events" || (r.gvr.Group != "" && r.gvr.Group != "events.k8s.io") {
		return name
	}
	table := s.tables[r.gvr]
	if _, taken := table[objKey{ns, name}]; !taken {
		return name
	}
	i := strings.LastIndexByte(name, '.')
	now := s.clock.Now().UnixNano()
	if i < 0 || name[i+1:] != strconv.FormatInt(now, 16) {
		return name
	}
	for n := now + 1; n <= now+maxEventsPerInstant; n++ {
		next := name[:i+1] + strconv.FormatInt(n, 16)
		if _, taken := table[objKey{ns, next}]; !taken {
			return next
		}
	}
	return name
}

// maxEventsPerInstant bounds the names eventName tries: more Events of
// one object in one instant are refused as taken, as before.
const maxEventsPerInstant = 1 << 16

func (s *store) createLocked(ctx context.Context, r *resource, ns string, obj runtime.Object, o writeOptions) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := r.checkKind(obj); err != nil {
		return nil, err
	}
	if r.namespaced {
		if ns == "" {
			ns = m.GetNamespace()
		}
		if m.GetNamespace() != "" && m.GetNamespace() != ns {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		m.SetNamespace(ns)
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(s.generateName(r.gvr, ns, m.GetGenerateName()))
	}
	m.SetName(s.eventName(r, ns, m.GetName()))
	if errs := validateCreate(r.groupResource(), m, r.namespaced); len(errs) > 0 {
		return nil, apierrors.NewInvalid(r.groupKind(), m.GetName(), errs)
	}
	if err := s.kinds.admitNamespace(r, ns); err != nil {
		return nil, err
	}
	created := createdKey{r.gvr, objKey{ns, m.GetName()}}
	m.SetUID(uidOf(created, s.created[created]+1))
	m.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	m.SetGeneration(1)
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	if p, ok := obj.(*corev1.Pod); ok {
		// As the API server's pod strategy does.
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	}
	if r.status && !r.typed() {
		// A custom resource's status is written through its subresource.
		delete(obj.(*unstructured.Unstructured).Object, "status")
	}
	if err := r.admit(ctx, obj, nil); err != nil {
		return nil, err
	}
	if err := s.kinds.beforeCreate(ctx, r, obj); err != nil {
		return nil, err
	}
	if _, ok := s.tables[r.gvr][objKey{ns, m.GetName()}]; ok {
		return nil, apierrors.NewAlreadyExists(r.groupResource(), m.GetName())
	}
	if err := r.track(ctx, nil, obj, o, ""); err != nil {
		return nil, err
	}
	if o.dryRun {
		return obj, nil
	}
	m.SetResourceVersion(s.next())
	s.table(r)[created.objKey] = obj
	s.created[created]++
	s.emit(r.gvr, ns, watch.Added, obj, nil)
	s.kinds.afterWrite(ctx, obj)
	return obj, nil
}

// update stores in (which the store now owns) over the current object.
// subresource "status" changes only the status (and resets the rest to the
// stored object); the main resource changes all but the status, for
// resources with a status subresource. precondition, when set, is the
// resourceVersion the write must be based on; otherwise the one in the
// object is, when set.
func (s *store) update(ctx context.Context, r *resource, ns string, in runtime.Object, subresource, precondition string, o writeOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	return s.updateLocked(ctx, r, ns, in, subresource, precondition, o)
}

func (s *store) updateLocked(ctx context.Context, r *resource, ns string, in runtime.Object, subresource, precondition string, o writeOptions) (runtime.Object, error) {
	m, err := meta.Accessor(in)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := r.checkKind(in); err != nil {
		return nil, err
	}
	if !r.namespaced {
		ns = ""
	} else if ns == "" {
		ns = m.GetNamespace()
	}
	stored, err := s.lookup(r, ns, m.GetName())
	if err != nil {
		return nil, err
	}
	sm, _ := meta.Accessor(stored)
	if precondition == "" {
		precondition = m.GetResourceVersion()
	}
	if precondition == "" && o.put && subresource == "" && !r.typed() {
		// Custom resources refuse unconditional updates.
		return nil, invalid(r, m.GetName(), field.NewPath("metadata", "resourceVersion"), "must be specified for an update")
	}
	if precondition != "" && precondition != sm.GetResourceVersion() {
		return nil, apierrors.NewConflict(r.groupResource(), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	switch subresource {
	case "", "status":
	case "finalize":
		if r.gvr != namespacesGVR {
			return nil, apierrors.NewNotFound(r.groupResource(), m.GetName())
		}
	default:
		return nil, apierrors.NewMethodNotSupported(r.groupResource(), "update "+subresource)
	}
	if subresource == "status" && !r.status {
		return nil, apierrors.NewNotFound(r.groupResource(), m.GetName())
	}

	var out runtime.Object
	switch subresource {
	case "status":
		out = shallowCopy(stored)
		setStatus(out, in)
		om, _ := meta.Accessor(out)
		om.SetManagedFields(m.GetManagedFields())
	case "finalize":
		ns := *stored.(*corev1.Namespace)
		ns.Spec.Finalizers = in.(*corev1.Namespace).Spec.Finalizers
		out = &ns
	default:
		out = in
		if r.status {
			setStatus(out, stored)
		}
	}
	om, _ := meta.Accessor(out)
	// What the client cannot change.
	om.SetNamespace(sm.GetNamespace())
	om.SetName(sm.GetName())
	om.SetUID(sm.GetUID())
	om.SetCreationTimestamp(sm.GetCreationTimestamp())
	om.SetDeletionTimestamp(sm.GetDeletionTimestamp())
	om.SetDeletionGracePeriodSeconds(sm.GetDeletionGracePeriodSeconds())
	om.SetGeneration(sm.GetGeneration())
	om.SetSelfLink("")
	if om.GetGenerateName() == "" {
		om.SetGenerateName(sm.GetGenerateName())
	}
	if sm.GetDeletionTimestamp() != nil {
		if added := newFinalizers(sm.GetFinalizers(), om.GetFinalizers()); len(added) > 0 {
			return nil, apierrors.NewForbidden(r.groupResource(), m.GetName(),
				fmt.Errorf("no new finalizers can be added if the object is being deleted, found new finalizers %q", added))
		}
	}
	if err := r.admit(ctx, out, stored); err != nil {
		return nil, err
	}
	// Compared once defaulted, as the server decodes the request before
	// it compares: a defaulted field removed is no change of the spec.
	if subresource == "" && !sameSpec(stored, out) {
		om.SetGeneration(sm.GetGeneration() + 1)
	}
	if err := s.kinds.beforeUpdate(ctx, r, out, stored); err != nil {
		return nil, err
	}
	if err := r.track(ctx, stored, out, o, subresource); err != nil {
		return nil, err
	}
	om.SetResourceVersion(sm.GetResourceVersion())
	if sameObject(stored, out) {
		return stored, nil // a no-op write changes nothing, not even the resourceVersion
	}
	if o.dryRun {
		return out, nil
	}
	om.SetResourceVersion(s.next())
	key := objKey{ns, om.GetName()}
	if om.GetDeletionTimestamp() != nil && len(om.GetFinalizers()) == 0 && !s.kinds.holds(out) {
		delete(s.tables[r.gvr], key)
		s.emit(r.gvr, ns, watch.Deleted, out, stored)
		s.kinds.afterDelete(ctx, r, out)
		return out, nil
	}
	s.tables[r.gvr][key] = out
	s.emit(r.gvr, ns, watch.Modified, out, stored)
	s.kinds.afterWrite(ctx, out)
	return out, nil
}

func newFinalizers(old, now []string) []string {
	var added []string
	for _, f := range now {
		if !slices.Contains(old, f) {
			added = append(added, f)
		}
	}
	return added
}

// delete deletes ns/name: at once, or by marking it (deletionTimestamp)
// when finalizers or a bound pod's kubelet must finish first. A
// propagation policy of Foreground or Orphan adds the garbage collector's
// finalizer, as the API server does.
func (s *store) delete(ctx context.Context, r *resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped()
	}
	return s.deleteLocked(ctx, r, ns, name, opts)
}

func (s *store) deleteLocked(ctx context.Context, r *resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	if !r.namespaced {
		ns = ""
	}
	stored, err := s.lookup(r, ns, name)
	if err != nil {
		return nil, err
	}
	sm, _ := meta.Accessor(stored)
	if pre := opts.Preconditions; pre != nil {
		// The API server's own words, capitals included.
		if pre.UID != nil && *pre.UID != sm.GetUID() {
			return nil, apierrors.NewConflict(r.groupResource(), name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, sm.GetUID()))
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != sm.GetResourceVersion() {
			return nil, apierrors.NewConflict(r.groupResource(), name,
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, sm.GetResourceVersion()))
		}
	}
	if opts.PropagationPolicy != nil {
		switch p := *opts.PropagationPolicy; p {
		case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
		default:
			return nil, invalid(r, name, field.NewPath("propagationPolicy"), fmt.Sprintf("unsupported propagation policy %q", p))
		}
	}
	isDryRun := len(opts.DryRun) > 0
	gcFinalizer := gcFinalizerFor(opts)
	grace := gracePeriod(stored, opts)
	finalizers := sm.GetFinalizers()
	if gcFinalizer != "" && !slices.Contains(finalizers, gcFinalizer) {
		finalizers = append(slices.Clip(finalizers), gcFinalizer)
	}
	if grace == 0 && len(finalizers) == 0 && !s.kinds.holds(stored) {
		if isDryRun {
			return stored, nil
		}
		final := shallowCopy(stored)
		fm, _ := meta.Accessor(final)
		fm.SetResourceVersion(s.next())
		delete(s.tables[r.gvr], objKey{ns, name})
		s.emit(r.gvr, ns, watch.Deleted, final, stored)
		s.kinds.afterDelete(ctx, r, final)
		return final, nil
	}
	if sm.GetDeletionTimestamp() != nil {
		// Already terminating: a shorter grace shortens it, anything
		// else leaves it as it is.
		if grace >= ptrValue(sm.GetDeletionGracePeriodSeconds()) {
			return stored, nil
		}
	}
	if isDryRun {
		return stored, nil
	}
	// Graceful: mark it; the kubelet (or whoever holds a finalizer) finishes.
	out := shallowCopy(stored)
	om, _ := meta.Accessor(out)
	at := metav1.NewTime(s.clock.Now().Add(time.Duration(grace) * time.Second))
	if sm.GetDeletionTimestamp() == nil || at.Before(sm.GetDeletionTimestamp()) {
		om.SetDeletionTimestamp(&at)
	}
	om.SetDeletionGracePeriodSeconds(&grace)
	om.SetFinalizers(finalizers)
	s.kinds.marking(out)
	om.SetResourceVersion(s.next())
	s.tables[r.gvr][objKey{ns, name}] = out
	s.emit(r.gvr, ns, watch.Modified, out, stored)
	s.kinds.afterWrite(ctx, out)
	return out, nil
}

func ptrValue(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// gcFinalizerFor is the finalizer the garbage collector honours for a
// delete's propagation policy, or "" for background deletion.
func gcFinalizerFor(opts metav1.DeleteOptions) string {
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationForeground:
			return metav1.FinalizerDeleteDependents
		case metav1.DeletePropagationOrphan:
			return metav1.FinalizerOrphanDependents
		}
	}
	return ""
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

// deleteCollection deletes every object of r in ns that o selects.
func (s *store) deleteCollection(ctx context.Context, r *resource, ns string, o listOptions, opts metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStopped()
	}
	var doomed []string
	for k, obj := range s.tables[r.gvr] {
		if (ns == "" || k.ns == ns) && r.matches(obj, o.label, o.field) {
			doomed = append(doomed, k.String())
		}
	}
	slices.Sort(doomed)
	for _, k := range doomed {
		kns, name, _ := strings.Cut(k, "/")
		if _, err := s.deleteLocked(ctx, r, kns, name, opts); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// bind is the pods/binding subresource: it sets spec.nodeName once.
func (s *store) bind(ns string, binding *corev1.Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStopped()
	}
	r := s.kinds.builtin(podsGVR)
	if ns == "" {
		ns = binding.Namespace
	}
	stored, err := s.lookup(r, ns, binding.Name)
	if err != nil {
		return err
	}
	pod := *stored.(*corev1.Pod) // a shallow copy: only top-level fields change
	if pod.Spec.NodeName != "" {
		return apierrors.NewConflict(r.groupResource(), pod.Name,
			fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	if pod.DeletionTimestamp != nil {
		return apierrors.NewConflict(r.groupResource(), pod.Name, fmt.Errorf("pod %s is being deleted", pod.Name))
	}
	if binding.Target.Name == "" {
		return invalid(r, pod.Name, field.NewPath("target", "name"), "must be specified")
	}
	pod.Spec.NodeName = binding.Target.Name
	pod.ResourceVersion = s.next()
	s.tables[r.gvr][objKey{ns, pod.Name}] = &pod
	s.emit(r.gvr, ns, watch.Modified, &pod, stored)
	return nil
}

// emit records a write and offers it to every watcher. Callers hold s.mu.
func (s *store) emit(gvr schema.GroupVersionResource, ns string, typ watch.EventType, obj, prev runtime.Object) {
	e := event{rv: s.rv, gvr: gvr, ns: ns, typ: typ, obj: obj, prev: prev}
	if dropped, ok := s.history.push(e, s.limit); ok {
		s.compacted = dropped
	}
	for w := range s.watchers {
		w.offer(e)
	}
	s.gc.enqueue(s.owners.index(e, s.ownerTerminating))
}

// compact forgets the history: a watch from any resourceVersion before now
// gets 410 Expired, as after an etcd compaction.
func (s *store) compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rv
	s.history = ring{}
}

// ring is the write history: a slice that grows to the limit, then a
// ring over it, so a full history costs one store per write and no copy.
type ring struct {
	events []event
	head   int // the oldest event, once full
}

func (r *ring) len() int { return len(r.events) }

// at is the i-th oldest event.
func (r *ring) at(i int) event { return r.events[(r.head+i)%len(r.events)] }

// push appends e, dropping the oldest event when limit are kept, and
// returns the dropped event's resourceVersion.
func (r *ring) push(e event, limit int) (int64, bool) {
	if len(r.events) < limit {
		r.events = append(r.events, e)
		return 0, false
	}
	if limit == 0 {
		return e.rv, true
	}
	dropped := r.events[r.head].rv
	r.events[r.head] = e
	r.head = (r.head + 1) % len(r.events)
	return dropped, true
}

// since is the index of the first event after resourceVersion rv.
func (r *ring) since(rv int64) int {
	return sort.Search(r.len(), func(i int) bool { return r.at(i).rv > rv })
}

// stop ends every watch and the garbage collector, and refuses further
// requests.
func (s *store) stop() {
	s.mu.Lock()
	if !s.closed {
		close(s.gc.stop)
	}
	s.closed = true
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
	if s.gcStarted {
		<-s.gc.done
	}
}

// start runs the garbage collector until stop.
func (s *store) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gcStarted && !s.closed {
		s.gcStarted = true
		go s.gc.run(s)
	}
}
