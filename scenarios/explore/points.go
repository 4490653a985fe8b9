package explore

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

// Classes of injection point, after Sieve's three patterns and the API's
// error answers.
const (
	// Intermediate: the controller dies (crash, or SIGTERM) right after one
	// of its writes took effect, leaving what it meant to do half done.
	Intermediate = "intermediate"
	// Unobserved: the controller misses an event (lost, so it learns of
	// the change from a relist; or held back until the next event of the
	// object).
	Unobserved = "unobserved"
	// Stale: the controller's view lags (a watch that must relist, a
	// delete it learns of only as a tombstone, a restart against a view
	// from before its last write, or from before a deletion it had seen).
	Stale = "stale"
	// Refused: one request answered with an error (409 on a write, 5xx).
	Refused = "refused"
	// Input: no fault; a change of the desired state after the world
	// converged (InputPoint).
	Input = "input"
)

// Point is one injection: a single fault aimed at one moment of the
// reference run.
type Point struct {
	// ID names the point in reports and file names: "p017".
	ID    string     `json:"id"`
	Class string     `json:"class"`
	Fault chaos.Spec `json:"fault"`
	// Also are faults that go with Fault to make the point: the view a
	// restarted instance starts from.
	Also []chaos.Spec `json:"also,omitempty"`
	// Signature is what the point does, with generated name suffixes
	// collapsed: points with one signature are repeats of each other.
	Signature string `json:"signature"`
	// At is when, in the reference run, the request or event it aims at
	// happened.
	At reports.Duration `json:"at"`
	// About names the request or event, as the reference saw it.
	About string `json:"about"`
	// Size is how many changes an input point makes; 0 for a fault's.
	Size int `json:"size,omitempty"`
}

// Step is one pruning pass and the points before and after it.
type Step struct {
	Name   string `json:"name"`
	Before int    `json:"before"`
	After  int    `json:"after"`
}

// MaxRepeats is how many points of one signature are kept: the first
// three occurrences of "crash after a patch of web-*" say what the fourth
// would.
const MaxRepeats = 3

// StormLength is how many writes of one object in a row a storm point
// answers with 503: more than a controller that gives up after a few
// retries tries, and over in well under a second of a correct one's
// backoff.
const StormLength = 8

// delayFloor is the least an event is held back when its next event
// follows at once.
const delayFloor = time.Second

// candidate is a point before pruning, with what the passes look at.
type candidate struct {
	Point
	write     bool // it comes from a controller write
	failed    bool // that write failed
	noop      bool // that write changed nothing the observer saw
	unwatched bool // an event of a resource the controller never watched
	last      bool // an event no later event of its object overwrote
}

// enumerate lists the points of a reference run's history, then prunes
// them: steps say how many each pass removed. deterministic says whether
// an object (resource/name) exists in every reference run.
func enumerate(ref *reports.Result, deterministic func(object string) bool) ([]Point, map[string]int, []Step) {
	h := ref.History
	start := ref.Started
	// Where an instance's injector measures windows from: its first
	// instance's start.
	origin := runStart(ref).Add(firstStart(ref))
	var cands []candidate
	watched := map[string]bool{}
	for _, q := range h.Requests {
		if q.Verb == "watch" || q.Verb == "list" {
			watched[base(q.Resource)] = true
		}
	}
	// An object some reference never saw (a pod with a generated name) is
	// aimed at through its resource: "the 7th event of a pod", not "the
	// 2nd of web-0-h", which another run may not have.
	aim := func(verbs []string, resource, name string) (chaos.Target, string, string) {
		if deterministic(resource + "/" + name) {
			return chaos.Target{Verbs: verbs, Resource: resource, Name: name}, resource + "/" + name, resource + "/" + collapse(name)
		}
		return chaos.Target{Verbs: verbs, Resource: resource}, resource, resource + "/" + prefix(name) + "*"
	}
	// Writes: crash and SIGTERM after each, and 409 on each.
	succeeded := matches{}
	tried := matches{}
	kinds := map[string]bool{}
	for i, q := range h.Requests {
		res := base(q.Resource)
		if !kinds[q.Verb+" "+res] && q.Verb != "watch" {
			kinds[q.Verb+" "+res] = true
			t := chaos.Target{Verbs: []string{q.Verb}, Resource: res}
			cands = append(cands, candidate{Point: Point{Class: Refused, About: q.Verb + " " + res,
				Fault:     chaos.Spec{Fault: chaos.FaultServerError, Code: 500, Target: t, When: chaos.When{Nth: 1}},
				Signature: "server-error " + q.Verb + " " + res, At: since(start, q.At)}})
		}
		if !writesOne(q.Verb) || q.Name == "" {
			continue
		}
		t, key, object := aim([]string{q.Verb}, res, q.Name)
		key = q.Verb + " " + key
		nth := tried.add(key, q.At)
		ok := q.Code >= 200 && q.Code < 300
		sig := q.Verb + " " + object
		about := fmt.Sprintf("%s (instance %d)", q.String(), q.Instance)
		c := candidate{write: true, failed: !ok, noop: ok && !changed(h, i)}
		if q.Verb != "delete" {
			c409 := c
			c409.failed = false // a 409 needs the request, not its success
			c409.Point = Point{Class: Refused, About: about, Fault: chaos.Spec{Fault: chaos.FaultConflict, Target: t, When: tried.when(key, nth, origin)},
				Signature: "conflict " + sig, At: since(start, q.At)}
			cands = append(cands, c409)
		}
		if ok {
			succeeded.add(key, q.At)
		}
		if nth == 1 && t.Name != "" {
			storm := c
			storm.failed, storm.noop = false, false
			storm.Point = Point{Class: Refused, About: about, Fault: chaos.Spec{Fault: chaos.FaultServerError, Code: 503, Target: t, When: chaos.When{Count: StormLength}},
				Signature: "server-error storm " + sig, At: since(start, q.At)}
			cands = append(cands, storm)
		}
		after := succeeded.when(key, max(len(succeeded[key]), 1), origin)
		for _, f := range []string{chaos.FaultCrash, chaos.FaultTerminate} {
			cc := c
			cc.Point = Point{Class: Intermediate, About: about, Fault: chaos.Spec{Fault: f, Target: t, When: after},
				Signature: f + " after " + sig, At: since(start, q.At)}
			cands = append(cands, cc)
		}
		// Stale: the controller restarts right after the write, and its
		// successor starts against a view from before it (a lagging API
		// server replica), which holds until TravelHold has passed: an
		// object it had created is missing, one it had deleted is there,
		// one it had changed is as it was.
		if ok {
			st := c
			st.Point = Point{Class: Stale, About: about, Fault: chaos.Spec{Fault: chaos.FaultCrash, Target: t, When: after},
				Also:      []chaos.Spec{travelBefore()},
				Signature: "restart before " + sig, At: since(start, q.At)}
			cands = append(cands, st)
		}
	}
	// Watches: 410 on each (re)start of a watch.
	watches := matches{}
	for _, q := range h.Requests {
		if q.Verb != "watch" {
			continue
		}
		res := base(q.Resource)
		nth := watches.add(res, q.At)
		cands = append(cands, candidate{Point: Point{Class: Stale, About: fmt.Sprintf("watch %s #%d", res, nth),
			Fault:     chaos.Spec{Fault: chaos.FaultWatchExpired, Target: chaos.Target{Verbs: []string{"watch"}, Resource: res}, When: watches.when(res, nth, origin)},
			Signature: "watch-expired " + res, At: since(start, q.At)}})
	}
	// Events: drop or hold back each; a tombstone for each deletion.
	frames := matches{}
	deletions := matches{}
	for i, e := range h.Events {
		t, key, object := aim(nil, e.Resource, e.Name)
		frame := frames.when(key, frames.add(key, e.At), origin)
		next := nextEvent(h.Events, i)
		c := candidate{unwatched: !watched[e.Resource], last: next < 0}
		sig := strings.ToLower(e.Type) + " " + object
		about := fmt.Sprintf("%s %s/%s", e.Type, e.Resource, e.Name)
		at := since(start, e.At)
		// Lost: the informer learns of the change from a relist.
		lost := c
		lost.last = false
		lost.Point = Point{Class: Unobserved, About: about, Fault: chaos.Spec{Fault: chaos.FaultWatchLost, Target: t, When: frame},
			Signature: "watch-lost " + sig, At: at}
		cands = append(cands, lost)
		hold := c
		d := delayFloor
		if next >= 0 {
			d = max(h.Events[next].At.Sub(e.At)+delayFloor, delayFloor).Round(time.Millisecond)
		}
		hold.Point = Point{Class: Unobserved, About: about, Fault: chaos.Spec{Fault: chaos.FaultWatchDelay, Delay: d, Target: t, When: frame},
			Signature: "watch-delay " + sig, At: at}
		cands = append(cands, hold)
		if e.Type == "DELETED" {
			// A tombstone acts on deletions only, so only they count.
			nth := deletions.add(key, e.At)
			when := chaos.When{Count: 1}
			if t.Name == "" {
				when = deletions.when(key, nth, origin)
			}
			tomb := c
			tomb.last = false // the relist tells the controller, late
			tomb.Point = Point{Class: Stale, About: about, Fault: chaos.Spec{Fault: chaos.FaultTombstone, Target: t, When: when},
				Signature: "tombstone " + object, At: at}
			cands = append(cands, tomb)
			// The controller restarts after the deletion, and its successor
			// starts against a view from before it, which still holds the
			// deleted object, until TravelHold has passed.
			held := c
			held.last = false
			held.Point = Point{Class: Stale, About: about, Fault: chaos.Spec{Fault: chaos.FaultCrash, When: chaos.When{After: e.At.Sub(start), Count: 1}},
				Also:      []chaos.Spec{travelBeforeDeletion()},
				Signature: "restart holding deleted " + object, At: at}
			cands = append(cands, held)
		}
	}
	found := map[string]int{}
	for _, c := range cands {
		found[c.Class]++
	}
	var steps []Step
	pass := func(name string, drop func(c candidate) bool) {
		before := len(cands)
		cands = slices.DeleteFunc(cands, drop)
		steps = append(steps, Step{Name: name, Before: before, After: len(cands)})
	}
	pass("writes that failed", func(c candidate) bool { return c.write && c.failed && c.Class == Intermediate })
	pass("writes that changed nothing", func(c candidate) bool { return c.write && c.noop && c.Class != Refused })
	pass("events of resources the controller does not watch", func(c candidate) bool { return c.unwatched })
	pass("events held back with no later event to wait for", func(c candidate) bool { return c.Class == Unobserved && c.last })
	seen := map[string]int{}
	pass(fmt.Sprintf("repeats of a signature beyond the %d first", MaxRepeats), func(c candidate) bool {
		seen[c.Signature]++
		return seen[c.Signature] > MaxRepeats
	})
	points := make([]Point, len(cands))
	for i, c := range cands {
		points[i] = c.Point
		points[i].ID = fmt.Sprintf("p%03d", i+1)
	}
	return points, found, steps
}

// aimSlack is how far before a reference's instant a point's window opens:
// the instants of a virtual-time run repeat exactly, the slack only spares
// an instance that started a hair later.
const aimSlack = time.Millisecond

// matches are the instants at which the reference met a kind of request or
// event, by key, in order: a point aims at one of them.
type matches map[string][]time.Time

// add counts a match of key at at and returns its number (1-based).
func (m matches) add(key string, at time.Time) int {
	m[key] = append(m[key], at)
	return len(m[key])
}

// when aims at key's n-th match (1-based; the first when there is none):
// the match of that rank among those from its instant on, in a window that
// opens then (after origin, where the injector measures from). Counted
// from the run's start, it would aim at another request in a run where the
// controller wrote the object once more before: two reconciles of one
// instant racing, which the controller's own goroutines decide; counted
// from the instant, a point hits the write it was found at.
func (m matches) when(key string, n int, origin time.Time) chaos.When {
	times := m[key]
	if n < 1 || n > len(times) {
		return chaos.When{Nth: max(n, 1)}
	}
	from := times[n-1].Add(-aimSlack)
	if !from.After(origin) {
		return chaos.When{Nth: n}
	}
	rank := 0
	for _, t := range times[:n] {
		if !t.Before(from) {
			rank++
		}
	}
	return chaos.When{After: from.Sub(origin), Nth: rank}
}

// TravelHold is how long a restarted instance's view stays from before
// the write it restarted after: in virtual time its workers act on it at
// once, and a longer hold only delays the controller past what the
// late-started references cover (a correct operator whose object was
// deleted meanwhile never creates what they did).
const TravelHold = 2 * time.Second

// travelBefore is the time-travel of a restart point: the first instance
// started after the crash lists from before the last write, for
// TravelHold.
func travelBefore() chaos.Spec {
	return chaos.Spec{Fault: chaos.FaultTimeTravel, Writes: 1, Hold: TravelHold, When: chaos.When{Restarted: true, Count: 1}}
}

// travelBeforeDeletion is the time-travel of a deletion's restart point:
// the first instance started after the crash lists from before the last
// deletion its predecessors were told of, for TravelHold.
func travelBeforeDeletion() chaos.Spec {
	return chaos.Spec{Fault: chaos.FaultTimeTravel, Deletions: 1, Hold: TravelHold, When: chaos.When{Restarted: true, Count: 1}}
}

func since(start, at time.Time) reports.Duration { return reports.Duration(at.Sub(start)) }

// base is "deployments" of "deployments/status".
func base(resource string) string {
	r, _, _ := strings.Cut(resource, "/")
	return r
}

// writesOne: verb writes one named object (a deletecollection names none).
func writesOne(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// changed reports whether the write h.Requests[i] changed its object: the
// observer saw an event of it from the write's instant on, before the
// controller's next write of it.
func changed(h reports.History, i int) bool {
	q := h.Requests[i]
	res := base(q.Resource)
	end := time.Time{}
	for _, n := range h.Requests[i+1:] {
		if writesOne(n.Verb) && base(n.Resource) == res && n.Name == q.Name {
			end = n.At
			break
		}
	}
	for _, e := range h.Events {
		if e.Resource != res || e.Name != q.Name || e.At.Before(q.At) {
			continue
		}
		if !end.IsZero() && e.At.After(end) {
			break
		}
		return true
	}
	return false
}

// nextEvent is the index of the next event of the object of events[i], or
// -1.
func nextEvent(events []reports.WatchEvent, i int) int {
	for j := i + 1; j < len(events); j++ {
		if events[j].Resource == events[i].Resource && events[j].Name == events[i].Name {
			return j
		}
	}
	return -1
}

var generated = regexp.MustCompile(`-[a-z0-9]{5}$|-[a-f0-9]{8,10}$`)

// prefix is a name without its last dash-separated part: "web-0" of
// "web-0-1y".
func prefix(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		return name[:i+1]
	}
	return name
}

// collapse replaces a generated name's suffix by *: pods of one
// ReplicaSet share a signature.
func collapse(name string) string {
	if generated.MatchString(name) && strings.ContainsAny(name[strings.LastIndexByte(name, '-'):], "0123456789") {
		return generated.ReplaceAllString(name, "-*")
	}
	return name
}
