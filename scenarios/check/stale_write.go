package check

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-lab/converge/reports"
)

// NoStaleWrite breaks when a controller's write sets a field of an object
// back to an older value, undoing its own newer one, from a view older
// than what it had already received.
const NoStaleWrite = "no-stale-write"

func noStaleWrite() Check {
	return Check{
		Name: NoStaleWrite, Kind: reports.KindInvariant, Invariant: true,
		Catches: "a successful patch or update that sets a field of an object back to an older value, over the value the controller had set itself " +
			"in the newest version of the object it had received (in any instance's list, get, watch event or write answer), sent while the instance's own view of the object " +
			"(its newest version in a list, a get or a watch event) was older than that version, the value being either what that old view held " +
			"(a stale copy written back: a cache that had not caught up with the instance's own write) or one the controller had written before its newer one " +
			"(a decision repeated from the past: a successor started against a lagging API server). It regresses the object to a state older than one it had observed. " +
			"A write with a resourceVersion precondition cannot do it: the server refuses it. Not judged: a write that changes nothing, a value someone else set, " +
			"a new decision (a value neither the old view held nor the controller had written before), and a write from a view as new as what the controller had received " +
			"(a view of another object lagging behind is not tied to the write). " +
			"Fields are read as no-write-war reads them; versions are compared by resourceVersion, and objects whose resourceVersions are not numbers are not judged.",
		Reads: "each successful write's body (History.Requests[].Body, .UID) against the versions of its object its controller's instances had received before sending it " +
			"(Received with their resourceVersions, up to Requests[].Received), those versions' content as the observer saw them (Events), and the controller's earlier writes",
		judge: judgeStaleWrites,
	}
}

// version is one version of an object: its resourceVersion, and its
// content as the observer saw it (nil when it did not).
type version struct {
	rv  uint64
	obj map[string]any
}

// views indexes, for the stale-write check, every version of each object
// (by UID) the observer saw, and what each instance received.
type views struct {
	seen map[string][]version // by UID, in the order seen
	rcs  []reports.Receipt
	// received are the places in rcs of each UID's receipts, in order.
	received map[string][]int
}

func indexViews(h *reports.History) *views {
	v := &views{seen: map[string][]version{}, rcs: h.Received, received: map[string][]int{}}
	for i, rc := range h.Received {
		v.received[rc.UID] = append(v.received[rc.UID], i)
	}
	for _, e := range h.Events {
		if e.Object == nil || e.Type == "DELETED" {
			continue
		}
		uid, _, _ := unstructured.NestedString(e.Object, "metadata", "uid")
		rv, err := strconv.ParseUint(e.RV, 10, 64)
		if uid == "" || err != nil {
			continue
		}
		v.seen[uid] = append(v.seen[uid], version{rv, e.Object})
	}
	return v
}

// at is the version of uid the observer saw at rv; nil when it did not.
func (v *views) at(uid string, rv uint64) map[string]any {
	for _, s := range v.seen[uid] {
		if s.rv == rv {
			return s.obj
		}
	}
	return nil
}

// newest is the newest version of uid among the first n receipts that
// keep says count; 0 when there is none.
func (v *views) newest(n int, uid string, keep func(reports.Receipt) bool) uint64 {
	var best uint64
	for _, i := range v.received[uid] {
		if i >= n {
			break
		}
		rc := v.rcs[i]
		if rc.Deleted || !keep(rc) {
			continue
		}
		if rv, err := strconv.ParseUint(rc.RV, 10, 64); err == nil && rv > best {
			best = rv
		}
	}
	return best
}

// ownField is one field of one object (by UID) as one controller wrote it.
type ownField struct {
	controller, uid, path string
}

func judgeStaleWrites(j *judging) {
	if len(j.h.Received) == 0 {
		return
	}
	var v *views // built on the first write that needs it
	// wrote is, per field of an object as one controller wrote it, the
	// place in Requests of its last write of each value.
	wrote := map[ownField]map[string]int{}
	eachFieldWrite(j.h, func(i int, q reports.Request, key objectKey, fields []written) {
		if q.UID != "" && len(fields) > 0 {
			if v == nil {
				v = indexViews(j.h)
			}
			if detail := staleWrite(v, q, fields, wrote); detail != "" {
				subj := reports.Subject{Group: q.Body.Group, Resource: key.resource, Namespace: q.Namespace, Name: q.Name}
				j.find(Finding(NoStaleWrite, q.At, subj, &q, fmt.Sprintf("instance %d%s wrote %s/%s: %s", q.Instance, of(q.Controller), key.resource, q.Name, detail)))
			}
		}
		for _, f := range fields {
			k := ownField{q.Controller, q.UID, f.path}
			if wrote[k] == nil {
				wrote[k] = map[string]int{}
			}
			wrote[k][f.value] = i
		}
	})
}

// staleWrite says how q set a field back to an older value over its
// controller's own newer one from a stale view of the object; "" when it
// did not.
func staleWrite(v *views, q reports.Request, fields []written, wrote map[ownField]map[string]int) string {
	known := v.newest(q.Received, q.UID, func(rc reports.Receipt) bool { return rc.Controller == q.Controller })
	view := v.newest(q.Received, q.UID, func(rc reports.Receipt) bool {
		return !rc.Answer && rc.Controller == q.Controller && rc.Instance == q.Instance
	})
	if view == 0 || view >= known {
		return "" // it acted on the newest version its controller knew
	}
	newest, held := v.at(q.UID, known), v.at(q.UID, view)
	if newest == nil {
		return ""
	}
	for _, f := range fields {
		if !f.knownOld || f.old == f.value {
			continue // it changed nothing, or what it changed is not known
		}
		own := valueAt(newest, f.at)
		byIt := wrote[ownField{q.Controller, q.UID, f.path}]
		last, ownValue := byIt[own]
		if own == f.value || !ownValue {
			continue // not a value of its own that it undid
		}
		var how string
		switch before, again := byIt[f.value]; {
		case held != nil && valueAt(held, f.at) == f.value:
			how = "the value its view held"
		case again && before < last:
			how = "a value it had written before that one"
		default:
			continue // a decision of its own, not one its view repeats
		}
		return fmt.Sprintf("it set %s back to %s, %s, over %s, which its controller had set itself and had received at resourceVersion %d; "+
			"its view of the object was at resourceVersion %d",
			f.path, show(f.value), how, show(own), known, view)
	}
	return ""
}
