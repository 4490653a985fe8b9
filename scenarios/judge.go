package scenarios

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

// Rejudge judges a saved run again from its history alone, under s: its
// invariants, write rules, goal, budgets and allowed checks as they are
// now. A nil s is the scenario as the run had it (the result's Spec).
//
// Kept as the run recorded them: what it found as it happened (a panic,
// an instance that did not stop, a hot loop, the findings of the
// controller's own judge), what that judge said of its own goal at each
// poll, and a harness error. The goal is judged at the instants it was
// polled at; when the run ended (its own goal reached) before s's goal
// was reached or missed, the goal fails saying so: run it again to judge
// that goal. A result recorded before histories held what a verdict needs
// (schema v2 and older) is refused.
func Rejudge(saved *reports.Result, s *Scenario) (*reports.Result, error) {
	if saved.History.Start.IsZero() {
		return nil, fmt.Errorf("the result of %s (seed %d) was saved without what a verdict is judged on (the objects seen, the writes sent, the polls of the goal): run it again", saved.Scenario, saved.Seed)
	}
	var ran *Scenario
	if len(saved.Spec) > 0 {
		var err error
		if ran, err = Parse(saved.Scenario+" (as it ran)", saved.Spec); err != nil {
			return nil, fmt.Errorf("the scenario the result holds: %w", err)
		}
	}
	if s == nil {
		if ran == nil {
			return nil, fmt.Errorf("the result of %s holds no scenario: give one", saved.Scenario)
		}
		s = ran
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	// The controller's own judge's checks: those the run judged that are
	// neither built in nor the scenario's.
	var judgeChecks []string
	for _, name := range saved.Invariants {
		if slices.Contains(BuiltinInvariants, name) || (ran != nil && slices.ContainsFunc(ran.Invariants, func(i Invariant) bool { return i.Name == name })) {
			continue
		}
		judgeChecks = append(judgeChecks, name)
	}
	res := *saved
	res.Notes = slices.Clone(saved.Notes)
	sd := s.withDefaults()
	j, err := conclude(&sd, &res, judgeChecks, saved.Counters.Needed)
	if err != nil {
		return nil, err
	}
	res.Settle, res.Deadline = sd.Timing.Settle, sd.Timing.Deadline
	res.Counters.Reconciles, res.Counters.Retries = saved.Counters.Reconciles, saved.Counters.Retries
	decidedBefore := saved.Converged || slices.ContainsFunc(saved.Findings, func(f reports.Finding) bool { return f.Kind == reports.KindGoal })
	if !j.decided && decidedBefore && saved.Error == "" {
		end := res.History.Start.Add(time.Duration(saved.Simulated))
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckGoal, Kind: reports.KindGoal, At: end, Within: sd.Timing.Deadline,
			Detail: fmt.Sprintf("undecided: the run's record ends at %v, before this goal held for its settle window or its deadline passed; run it again to judge this goal", time.Duration(saved.Simulated))})
	}
	if res.Error != "" {
		res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckHarness, Kind: reports.KindHarness, Detail: res.Error})
	}
	res.Reasons = reports.Sentences(res.Findings, res.History.Start)
	res.Pass = len(res.Reasons) == 0 && res.Converged && res.Error == ""
	return &res, nil
}

// judged is what the history says of a run under a scenario: the
// findings of every check judged on it, and whether and when the goal
// was reached. The run's live verdict and `converge judge` both come from
// judgeHistory, so a saved history judged again gives the same verdict.
type judged struct {
	findings  []reports.Finding
	converged bool
	ttc       time.Duration
	// decided: the goal was reached, or the deadline passed, within the
	// polls recorded.
	decided bool
}

// judgeHistory judges h under s (with its defaults): the scenario's
// invariants on each object the observer saw and across objects, the
// write rules, the built-in checks that read the history, and the goal
// at each poll. What the run found as it happened (History.Recorded) is
// kept as it was.
func judgeHistory(s *Scenario, h *reports.History) (judged, error) {
	invs, goals, err := compile(s)
	if err != nil {
		return judged{}, err
	}
	j := &judging{s: s, h: h, invs: invs, goals: goals, first: map[string]int{}}
	for _, f := range h.Recorded {
		j.find(f)
	}
	j.invariants()
	j.across()
	j.writes()
	j.forbidden()
	out := j.goal()
	out.findings = j.found
	return out, nil
}

type judging struct {
	s     *Scenario
	h     *reports.History
	invs  []compiledInvariant
	goals []compiledExpectation
	found []reports.Finding
	first map[string]int // index in found of each check's finding
}

// find keeps the earliest finding of each check.
func (j *judging) find(f reports.Finding) {
	i, ok := j.first[f.Check]
	switch {
	case !ok:
		j.first[f.Check] = len(j.found)
		j.found = append(j.found, f)
	case f.At.Before(j.found[i].At):
		j.found[i] = f
	}
}

// invariants judges each invariant on one object on every version of it
// the observer saw (a transition rule on each change, against the one
// before). A field not there says nothing of that version.
func (j *judging) invariants() {
	var own []compiledInvariant
	for _, inv := range j.invs {
		if !inv.expr.Across() {
			own = append(own, inv)
		}
	}
	if len(own) == 0 {
		return
	}
	prev := map[objectKey]map[string]any{}
	for _, e := range j.h.Events {
		if e.Object == nil {
			continue
		}
		key := objectKey{e.Resource, e.Namespace, e.Name}
		old := prev[key]
		if e.Type == "DELETED" {
			delete(prev, key)
			continue
		}
		prev[key] = e.Object
		gvk := parseKind(e.Kind)
		u := &unstructured.Unstructured{Object: e.Object}
		for _, inv := range own {
			if inv.Select.APIVersion != gvk.GroupVersion().String() || inv.Select.Kind != gvk.Kind || !matches(inv.Select.Name, inv.sel, u) {
				continue
			}
			if inv.transition && old == nil {
				continue
			}
			held, err := inv.expr.Eval(e.Object, old)
			switch {
			case errors.Is(err, expect.ErrMissing):
			case err != nil:
				j.find(finding(InvRuleError, e.At, objectSubject(u), nil, fmt.Sprintf("invariant %s on %s %s: %v", inv.Name, gvk.Kind, e.Name, err)))
			case !held:
				j.find(finding(inv.Name, e.At, objectSubject(u), nil, fmt.Sprintf("%s %s (resourceVersion %s): %s is false", gvk.Kind, e.Name, e.RV, inv.Rule)))
			}
		}
	}
}

// maxJudgedAcross bounds the instants at which invariants across objects
// are judged in one run.
const maxJudgedAcross = 100_000

// across judges the invariants across objects at each resourceVersion
// the observer saw: every kind they read as it was at exactly that
// version, whatever order the observer's informers delivered the events
// of different kinds in. Between two such versions nothing a rule reads
// changed. A deletion learnt from a relist (a tombstone) carries the
// object's last version, not the deletion's: it counts from the newest
// version seen when it arrived.
func (j *judging) across() {
	var invs []compiledInvariant
	var kinds []string
	for _, inv := range j.invs {
		if inv.expr.Across() {
			invs = append(invs, inv)
			kinds = append(kinds, kindsAcross(inv.Rule)...)
			kinds = append(kinds, inv.Select.Kind)
		}
	}
	if len(invs) == 0 {
		return
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	type instant struct {
		rv uint64
		i  int
	}
	var order []instant
	var newest uint64
	for i, e := range j.h.Events {
		if e.Object == nil || !slices.Contains(kinds, parseKind(e.Kind).Kind) {
			continue
		}
		rv, err := strconv.ParseUint(e.RV, 10, 64)
		if err != nil || e.Tombstone {
			rv = newest // an opaque version counts where it arrived
		}
		newest = max(newest, rv)
		order = append(order, instant{rv, i})
	}
	slices.SortStableFunc(order, func(a, b instant) int { return cmp.Compare(a.rv, b.rv) })
	state := map[string]map[objectKey]map[string]any{} // by kind
	for _, k := range kinds {
		state[k] = map[objectKey]map[string]any{}
	}
	judgedAt := 0
	for n := 0; n < len(order) && judgedAt < maxJudgedAcross; judgedAt++ {
		at := j.h.Events[order[n].i].At
		rv := j.h.Events[order[n].i].RV
		for start := n; n < len(order) && order[n].rv == order[start].rv; n++ {
			e := j.h.Events[order[n].i]
			at = minTime(at, e.At)
			key := objectKey{e.Resource, e.Namespace, e.Name}
			if e.Type == "DELETED" {
				delete(state[parseKind(e.Kind).Kind], key)
			} else {
				state[parseKind(e.Kind).Kind][key] = e.Object
			}
		}
		objects := make(map[string]any, len(kinds))
		for _, k := range kinds {
			keys := make([]objectKey, 0, len(state[k]))
			for key := range state[k] {
				keys = append(keys, key)
			}
			slices.SortFunc(keys, func(a, b objectKey) int {
				return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
			})
			items := make([]any, 0, len(keys))
			for _, key := range keys {
				items = append(items, state[k][key])
			}
			objects[k] = items
		}
		for _, inv := range invs {
			items, _ := objects[inv.Select.Kind].([]any)
			for _, it := range items {
				obj, _ := it.(map[string]any)
				u := &unstructured.Unstructured{Object: obj}
				if u.GetAPIVersion() != inv.Select.APIVersion || !matches(inv.Select.Name, inv.sel, u) {
					continue
				}
				held, err := inv.expr.EvalAcross(obj, objects)
				switch {
				case errors.Is(err, expect.ErrMissing):
				case err != nil:
					j.find(finding(InvRuleError, at, objectSubject(u), nil, fmt.Sprintf("invariant %s on %s %s: %v", inv.Name, inv.Select.Kind, u.GetName(), err)))
				case !held:
					j.find(finding(inv.Name, at, objectSubject(u), nil, fmt.Sprintf("%s %s at resourceVersion %s, with the objects of %v as they were then: %s is false",
						inv.Select.Kind, u.GetName(), rv, kinds, inv.Rule)))
				}
			}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// successfulWrite: q is a write of the controller that the server took,
// of an object rather than of its bookkeeping (leader election, events).
func successfulWrite(q reports.Request) bool {
	resource, _, _ := strings.Cut(q.Resource, "/")
	return isWrite(q.Verb) && q.Code >= 200 && q.Code < 300 && !bookkeeping(resource)
}

// writes judges each successful write: by one instance while another that
// wrote before it still ran (one-writer-at-a-time), and against the write
// rules when the scenario has any (writes-allowed), on the world as the
// observer had seen it when the write was sent.
func (j *judging) writes() {
	w := newSeen(j.h.Resources)
	last, any := -1, false
	for i, q := range j.h.Requests {
		if !successfulWrite(q) {
			continue
		}
		if any && last != q.Instance && j.running(last, i) {
			j.find(finding(InvSingleWriter, q.At, requestSubject(q), &q, fmt.Sprintf("instance %d wrote %s while instance %d, which wrote before it, was still running", q.Instance, q.Name, last)))
		}
		last, any = q.Instance, true
		if len(j.s.Writes) > 0 {
			w.upTo(j.h.Events, q.Seen)
			j.writeRules(w, q)
		}
	}
}

// running: instance idx had not ended when the history held n requests.
func (j *judging) running(idx, n int) bool {
	for _, l := range j.h.Lives {
		if l.Instance == idx {
			return l.Ended.IsZero() || l.Requests > n
		}
	}
	return false
}

// writeRules breaks writes-allowed when no write rule allows q. The object
// a rule selects by is the one sent for a create, else the latest version
// seen, or the last one for an object seen deleted already.
func (j *judging) writeRules(w *seen, q reports.Request) {
	resource, subresource, _ := strings.Cut(q.Resource, "/")
	b := q.Body
	if b == nil {
		b = &reports.Body{}
	}
	key := objectKey{resource, q.Namespace, q.Name}
	subject := w.latest[key]
	if subject == nil {
		subject = w.last[key]
	}
	if q.Verb == "create" && b.Object != nil {
		subject = b.Object
	}
	var changed []string
	switch {
	case q.Verb == "patch" && len(b.Patch) > 0: // else its body could not be read
		patch := []byte(b.Patch)
		var notJSON string // kept as a string (Write.body)
		if json.Unmarshal(patch, &notJSON) == nil {
			patch = []byte(notJSON)
		}
		changed = patchPaths(types.PatchType(b.PatchType), patch)
	case q.Verb == "update" && b.Object != nil:
		// Against the version the update was based on; one the observer
		// had not seen is not judged by field.
		rv, _, _ := unstructured.NestedString(b.Object, "metadata", "resourceVersion")
		if base := w.version(resource, q.Namespace, q.Name, rv); base != nil {
			changed = diffPaths(base, b.Object, subresource)
		}
	}
	why := ""
	for _, rule := range j.s.Writes {
		if subject == nil || !w.selects(rule.Select, resource, subject) {
			continue
		}
		if len(rule.Verbs) > 0 && !slices.Contains(rule.Verbs, q.Verb) {
			why = fmt.Sprintf("no rule lets it %s", q.Verb)
			continue
		}
		if bad := disallowed(changed, rule.Fields); bad != "" {
			why = "no rule lets it write " + bad
			continue
		}
		return
	}
	if why == "" {
		why = "no write rule selects it"
	}
	what := q.Resource
	if q.Name != "" {
		what += "/" + q.Name
	}
	subj := reports.Subject{Group: b.Group, Resource: resource, Namespace: q.Namespace, Name: q.Name}
	j.find(finding(InvWritesAllowed, q.At, subj, &q, fmt.Sprintf("the controller's %s of %s: %s", q.Verb, what, why)))
}

// goal judges the goal at each poll: the scenario's expectations on the
// world as seen then, the controller's own judge and its instances as
// they said then. The goal must hold for the settle window, from after
// the controller's last write unless the goal lets it stay busy, and
// after the last fault window, before the deadline.
func (j *judging) goal() judged {
	g := newGoalClock(j.s, j.h.Start)
	w := newSeen(j.h.Resources)
	var lastWrite time.Time
	n := 0
	for _, p := range j.h.Polls {
		w.upTo(j.h.Events, p.Events)
		ok, why, _ := g.answer(j.goals, w, p)
		for ; n < min(p.Requests, len(j.h.Requests)); n++ {
			if successfulWrite(j.h.Requests[n]) {
				lastWrite = j.h.Requests[n].At
			}
		}
		if converged, missed := g.step(p.At, ok, why, lastWrite, nil); converged {
			return judged{converged: true, ttc: g.holding.Sub(g.start), decided: true}
		} else if missed != nil {
			j.find(*missed)
			return judged{decided: true}
		}
	}
	return judged{}
}

// goalClock follows the goal from poll to poll: since when it has held,
// and how many polls in a row an instance had work.
type goalClock struct {
	start, deadline   time.Time
	settle, faultsEnd time.Duration
	busy              bool // the goal lets the controller write while it holds
	holding           time.Time
	busyPolls         int
}

// Instants are taken on the wall clock (Round(0) drops a monotonic
// reading): a saved history has no monotonic readings, and the goal must
// come out the same from it as during the run.
func newGoalClock(s *Scenario, start time.Time) *goalClock {
	start = start.Round(0)
	return &goalClock{start: start, deadline: start.Add(time.Duration(s.Timing.Deadline)), settle: time.Duration(s.Timing.Settle),
		faultsEnd: s.FaultsEnd(), busy: s.Goal.Busy}
}

// answer is the goal at poll p: the scenario's expectations on the world
// seen, the controller's own judge, and a live instance with nothing
// queued or in progress at two polls in a row.
//
// One poll is not enough: work that an event queued at the very instant
// of the poll (a pod turning ready as the ticker fires) is there or not
// depending on which goroutine ran first, on fake as on a real cluster,
// and a controller that handles it at once is quiet. Work still there a
// poll later is work.
//
// again says the next poll must look again even if nothing happened: an
// instance had work, or none led yet (an instance may take the lead, or
// show it in its probe, without a request).
func (g *goalClock) answer(goals []compiledExpectation, w *seen, p reports.Poll) (ok bool, why string, again bool) {
	if ok, why := goalHolds(goals, w); !ok {
		return false, why, false
	}
	switch {
	case p.Judge != "":
		return false, p.Judge, false
	case p.Replacing:
		return false, "an instance is being replaced", false
	case p.Live == 0:
		return false, "no instance is running and leading", true
	case p.Work == "":
		g.busyPolls = 0
		return true, "", false
	}
	g.busyPolls++
	if g.busyPolls >= 2 {
		return false, p.Work, true
	}
	return true, "", true
}

// step takes the goal's answer at at, with the controller's last write
// before it: converged once it has held for the settle window past the
// faults, or the goal's finding once the deadline has passed. note, when
// not nil, hears when the goal starts to hold and when it is lost.
func (g *goalClock) step(at time.Time, ok bool, why string, lastWrite time.Time, note func(time.Time, string)) (converged bool, missed *reports.Finding) {
	at, lastWrite = at.Round(0), lastWrite.Round(0)
	// A write of the controller restarts the settle window, unless the
	// goal lets it stay busy.
	if ok && !g.busy && !g.holding.IsZero() && lastWrite.After(g.holding) {
		g.holding = lastWrite
	}
	switch {
	case ok && g.holding.IsZero():
		g.holding = at
		if note != nil {
			note(at, "goal holds")
		}
	case !ok && !g.holding.IsZero():
		g.holding = time.Time{}
		if note != nil {
			note(at, "goal lost: "+why)
		}
	}
	// A run is not over while faults are still to come.
	if ok && at.Sub(g.holding) >= g.settle && at.Sub(g.start) >= g.faultsEnd {
		return true, nil
	}
	if ok {
		why = fmt.Sprintf("the goal held from %v on, short of the %v settle window", g.holding.Sub(g.start), g.settle)
	}
	if !at.Before(g.deadline) {
		return false, &reports.Finding{Check: reports.CheckGoal, Kind: reports.KindGoal, At: at, Within: reports.Duration(g.deadline.Sub(g.start)), Detail: why}
	}
	return false, nil
}
