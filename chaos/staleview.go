package chaos

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// view says how far behind a stale view is, and for how long it stays
// there (see TimeTravel).
type view struct {
	Lag       time.Duration
	Writes    int
	Deletions int
	Hold      time.Duration
}

// DefaultTravelHold is how long a time-travel keeps its view when the
// spec does not say.
const DefaultTravelHold = 10 * time.Second

// TimeTravel answers one instance's lists and watches of the target from
// the past, as an API server replica whose cache lags behind storage
// would. The past is a state the controller could have seen, from the
// resourceVersions the run's instances met in their own answers (lists,
// watch events, the answers to what they wrote): with lag, the newest they had met lag before the
// firing (the first they met, when that was later); with writes, the state
// just before the instances' writes-th latest successful write (1, the
// default: before the last one; before the first when there were fewer;
// before a delete, the state just before its deletion once a DELETED event
// of the object has reached a watch, else the newest met);
// with deletions, the state just before the deletions-th latest deletion
// they were told of by a watch event, which still holds the deleted
// object. At most one of lag, writes and deletions is set.
// The list that sets it off, and every list of the target's resources the
// instance makes for hold after it (10 s when zero), is served at the
// view's resourceVersion (whatever resourceVersion or match the client
// asked for; a continue page and a list at an exact resourceVersion keep
// theirs); a streamed list (sendInitialEvents) is refused with 422, as a
// server that cannot stream one does, so the reflector lists instead; the
// events of its watches are held until the hold ends, then delivered in
// order: the view catches up. Writes go to the current state and fail or
// succeed as they would (a stale update meets a 409). A get is answered
// from the current state: the API has no get at an exact resourceVersion.
//
// It fires on a list (or a streamed list) of the target: an informer
// starting, or relisting. With When.Restarted it fires only in an instance
// that replaced one that ended: a controller restarted against a lagging
// replica. A view older than the server keeps (compacted) cannot be served:
// the list goes on unchanged and the firing says so.
func TimeTravel(t Target, lag time.Duration, writes, deletions int, hold time.Duration) Fault {
	return newStaleView(FaultTimeTravel, t, view{Lag: lag, Writes: writes, Deletions: deletions, Hold: hold})
}

// StaleRead serves the lists that allow it from a view behind the current
// state (lag, writes or deletions back, as for time-travel), as the API's contract
// permits: a list at resourceVersion "0" (any
// state; a reflector's first list) at the view's resourceVersion, one at
// "not older than" X at the later of X and the view; a streamed list that
// allows it is refused with 422 so the reflector lists instead. A list
// that asks for the current state (no resourceVersion), or for an exact
// one, is left alone, and so are watches: a watch from the view's
// resourceVersion replays what followed it, so the informer catches up at
// once. A controller that breaks under it relies on a freshness the API
// does not promise.
func StaleRead(t Target, lag time.Duration, writes, deletions int) Fault {
	return newStaleView(FaultStaleRead, t, view{Lag: lag, Writes: writes, Deletions: deletions})
}

func newStaleView(name string, t Target, v view) staleView {
	if len(t.Verbs) == 0 {
		t.Verbs = []string{"list", "watch"}
	}
	if name == FaultTimeTravel && v.Hold == 0 {
		v.Hold = DefaultTravelHold
	}
	return staleView{name: name, t: t, v: v}
}

type staleView struct {
	everywhere
	name string
	t    Target
	v    view
}

func (f staleView) Name() string   { return f.name }
func (f staleView) Target() Target { return f.t }
func (f staleView) travels() bool  { return f.name == FaultTimeTravel }

// check refuses what a stale view cannot mean.
func (f staleView) check() error {
	var errs []error
	for _, v := range f.t.Verbs {
		if v != "list" && v != "watch" {
			errs = append(errs, fmt.Errorf("a stale view serves lists and watches, not %q (a get cannot be asked for at an older resourceVersion)", v))
		}
	}
	if f.t.Name != "" {
		errs = append(errs, errors.New("a stale view is of a whole resource: its target names no object"))
	}
	if f.v.Lag < 0 || f.v.Writes < 0 || f.v.Deletions < 0 || f.v.Hold < 0 {
		errs = append(errs, errors.New("negative lag, writes, deletions or hold"))
	}
	if countSet(f.v.Lag > 0, f.v.Writes > 0, f.v.Deletions > 0) > 1 {
		errs = append(errs, errors.New("more than one of lag, writes and deletions set: say how far back one way"))
	}
	return errors.Join(errs...)
}

// listQuery is what a list or watch asked of the resourceVersion.
type listQuery struct {
	rv       string
	match    string
	cont     bool
	initial  bool // sendInitialEvents
	isList   bool // a list, or a watch with initial events
	resource string
}

// allowsStale: the API lets the server answer q from a state older than
// the current one.
func (q listQuery) allowsStale() bool {
	if q.cont || q.match == string(metav1.ResourceVersionMatchExact) {
		return false
	}
	return q.rv != ""
}

// servedAt is the resourceVersion f serves q at from the view at rv, or
// ok false when f leaves q alone.
func (f staleView) servedAt(q listQuery, rv int64) (int64, bool) {
	if !q.isList || q.cont || q.match == string(metav1.ResourceVersionMatchExact) {
		return 0, false
	}
	if f.travels() {
		return rv, true
	}
	if !q.allowsStale() {
		return 0, false
	}
	if q.rv == "0" {
		return rv, true
	}
	floor, err := strconv.ParseInt(q.rv, 10, 64)
	if err != nil {
		return 0, false
	}
	return max(rv, floor), true
}

// views is what the stale-view faults of a run know: the resourceVersions
// its instances met, and the views from before their writes. Shared by
// the injectors of a run.
type views struct {
	mu     sync.Mutex
	marks  []mark  // when the newest resourceVersion met grew, oldest first
	before []int64 // the view just before each successful write, in order
	gone   []int64 // the view just before each deletion met, in order
	// deleting are the writes in before that are deletes whose DELETED
	// event has not been met yet, by object ("pods/ns/name").
	deleting map[string]int
	// unclaimed are the views just before DELETED events met before any
	// delete of the object was answered, by object: the event and the
	// delete's answer reach the instances in either order.
	unclaimed map[string]int64
}

type mark struct {
	at time.Time
	rv int64
}

// maxViewMarks bounds what a run keeps: the oldest half is forgotten.
const maxViewMarks = 1 << 16

// met records that an answer carried rv at at.
func (v *views) met(at time.Time, rv string) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.marks) > 0 && v.marks[len(v.marks)-1].rv >= n {
		return
	}
	if len(v.marks) == maxViewMarks {
		v.marks = slices.Delete(v.marks, 0, maxViewMarks/2)
	}
	v.marks = append(v.marks, mark{at, n})
}

// wrote records a successful write of object (resource/namespace/name)
// answered with it at rv. The view before a delete is the state just
// before its deletion's revision, which only the DELETED event carries:
// met already (the event overtook the answer), it is that; until an
// instance meets it, the newest met (which cannot hold the deletion yet).
// So is the view before a write answered without a version (a Status).
func (v *views) wrote(verb, object, rv string) {
	n, err := strconv.ParseInt(rv, 10, 64)
	v.mu.Lock()
	defer v.mu.Unlock()
	before := n - 1
	isDelete := verb == "delete" || verb == "deletecollection"
	if err != nil || n <= 0 || isDelete {
		if len(v.marks) == 0 {
			return
		}
		before = v.marks[len(v.marks)-1].rv
	}
	if len(v.before) == maxViewMarks {
		v.before = slices.Delete(v.before, 0, maxViewMarks/2)
		clear(v.deleting)
	}
	// The DELETED event met before this answer is this delete's when it
	// is not older than the version the answer carries (the object's
	// last, or the deletion's own): an earlier deletion of the same name
	// came before the object it answers for was made.
	if g, ok := v.unclaimed[object]; ok && verb == "delete" && err == nil && n > 0 && g >= n-1 {
		delete(v.unclaimed, object)
		v.before = append(v.before, g)
		return
	}
	v.before = append(v.before, before)
	if verb == "delete" && object != "" {
		if v.deleting == nil {
			v.deleting = map[string]int{}
		}
		v.deleting[object] = len(v.before) - 1
	}
}

// deleted records a DELETED watch event of object at rv (the deletion's
// revision): the view just before it still holds the object; a delete of
// the instances' own waiting for it gets that view, and one answered later
// claims it.
func (v *views) deleted(object, rv string) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 1 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if i, ok := v.deleting[object]; ok {
		if i < len(v.before) {
			v.before[i] = n - 1
		}
		delete(v.deleting, object)
	} else {
		if v.unclaimed == nil || len(v.unclaimed) == maxViewMarks {
			v.unclaimed = map[string]int64{}
		}
		v.unclaimed[object] = n - 1
	}
	if k := len(v.gone); k > 0 && v.gone[k-1] == n-1 {
		return // the same deletion, met by another watch
	}
	if len(v.gone) == maxViewMarks {
		v.gone = slices.Delete(v.gone, 0, maxViewMarks/2)
	}
	v.gone = append(v.gone, n-1)
}

// at is the view's resourceVersion at now, or a reason there is none.
func (v *views) at(now time.Time, view view) (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if view.Lag > 0 {
		if len(v.marks) == 0 {
			return 0, errors.New("no resourceVersion met yet")
		}
		then := now.Add(-view.Lag)
		i, _ := slices.BinarySearchFunc(v.marks, then, func(m mark, t time.Time) int { return m.at.Compare(t) })
		// marks[i] is the first after then (or at it); the one before is
		// the newest met by then.
		if i < len(v.marks) && v.marks[i].at.Equal(then) {
			return v.marks[i].rv, nil
		}
		return v.marks[max(i-1, 0)].rv, nil
	}
	if view.Deletions > 0 {
		if len(v.gone) == 0 {
			return 0, errors.New("no deletion met yet")
		}
		return v.gone[max(len(v.gone)-view.Deletions, 0)], nil
	}
	if len(v.before) == 0 {
		return 0, errors.New("no write made yet")
	}
	back := max(view.Writes, 1)
	return v.before[max(len(v.before)-back, 0)], nil
}

// window is one instance's stale view after a firing: lists served at rv
// until until, and while a refused stream waits for the list that
// follows it (pending).
type window struct {
	rv      int64
	until   time.Time
	pending map[string]bool // resources whose refused stream a list follows
}

// staleState is an injector's own windows (one instance's).
type staleState struct {
	mu      sync.Mutex
	windows map[int]*window
}

// staleFor decides what the stale views do to the list or watch r: the
// resourceVersion to serve a list at (serve), a streamed list to refuse
// (refuse), or nothing. Firings are recorded here. Deciding and opening a
// window is one step under the instance's lock: the informers of an
// instance list at once, and each must find the window the first opened.
func (inj *Injector) staleFor(r Request, q listQuery) (serve int64, refuse bool) {
	if inj.views == nil {
		return 0, false
	}
	now := inj.clock.Now()
	inj.stale.mu.Lock()
	defer inj.stale.mu.Unlock()
	for i, in := range inj.plan.Injections {
		f, ok := in.Fault.(staleView)
		if !ok || !f.t.Matches(r) {
			continue
		}
		w := inj.stale.windows[i]
		if w != nil && !now.Before(w.until) && len(w.pending) == 0 {
			delete(inj.stale.windows, i)
			w = nil
		}
		if w == nil {
			if !q.isList {
				continue
			}
			if _, eligible := f.servedAt(q, 0); !eligible {
				continue
			}
			n := inj.fires(i, r.String())
			if n == 0 {
				continue
			}
			rv, err := inj.views.at(now, f.v)
			if err != nil {
				inj.record(i, now, r.String(), n, "passed on: no earlier view ("+err.Error()+")")
				continue
			}
			w = &window{rv: rv, until: now.Add(f.v.Hold), pending: map[string]bool{}}
			inj.stale.windows[i] = w
			inj.record(i, now, r.String(), n, fmt.Sprintf("view set at resourceVersion %d%s", rv, holdText(f.v.Hold)))
		}
		at, eligible := f.servedAt(q, w.rv)
		if !eligible {
			continue
		}
		if q.initial {
			w.pending[q.resource] = true
		} else {
			delete(w.pending, q.resource)
		}
		return at, q.initial
	}
	return 0, false
}

func holdText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return ", held " + d.String()
}

// heldUntil is when the events of a watch of r may flow again: the end of
// the instance's time-travel window over r's resource, or zero.
func (inj *Injector) heldUntil(r Request) time.Time {
	if inj.views == nil {
		return time.Time{}
	}
	inj.stale.mu.Lock()
	defer inj.stale.mu.Unlock()
	var until time.Time
	for i, w := range inj.stale.windows {
		f := inj.plan.Injections[i].Fault.(staleView)
		if f.travels() && resourceMatches(f.t, r) && w.until.After(until) {
			until = w.until
		}
	}
	return until
}

// watchesStale: some stale view may act on the watches of r, so their
// events are read for the views and may be held.
func (inj *Injector) watchesStale(r Request) bool {
	if inj.views == nil {
		return false
	}
	for _, in := range inj.plan.Injections {
		if f, ok := in.Fault.(staleView); ok && resourceMatches(f.t, r) {
			return true
		}
	}
	return false
}

// staleServed records a list the view could not be served to (its
// resourceVersion compacted): it went on unchanged. A list served from
// the past is the firing's doing, not a firing of its own.
func (inj *Injector) staleServed(r Request, rv int64, err error) {
	if err == nil {
		return
	}
	for i, in := range inj.plan.Injections {
		if f, ok := in.Fault.(staleView); ok && f.t.Matches(r) {
			inj.record(i, inj.clock.Now(), r.String(), 0, fmt.Sprintf("passed on: resourceVersion %d cannot be served (%v)", rv, err))
			return
		}
	}
}

// errStreamRefused is a stale view's answer to a streamed list: the server
// cannot stream its initial state, so the reflector lists instead.
func errStreamRefused() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: "converge: this view of the API cannot stream a list (sendInitialEvents); list instead"}}
}

// queryOf reads what the HTTP request r asks of the resourceVersion.
func queryOf(req *http.Request, r Request) listQuery {
	v := req.URL.Query()
	return listQuery{rv: v.Get("resourceVersion"), match: v.Get("resourceVersionMatch"), cont: v.Get("continue") != "",
		initial: r.InitialEvents, isList: r.Lists(), resource: r.Resource}
}

// hasStaleViews: the plan holds a stale view, so the injector reads the
// resourceVersions its answers carry.
func hasStaleViews(in []Injection) bool {
	for _, x := range in {
		if _, ok := x.Fault.(staleView); ok {
			return true
		}
	}
	return false
}

// countSet is how many of set are true.
func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// objectKey names an object for the views: "pods/ns/name".
func objectKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}
