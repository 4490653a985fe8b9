package check

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

// NoWriteWar breaks when two controllers keep undoing each other's value
// of one field of one object.
const NoWriteWar = "no-write-war"

// A write war is warUndos undos of one field within warWindow. An undo is
// a write that sets a field back to the value it had before another
// controller changed it: A sets x, B sets y, A sets x again (one undo), B
// sets y again (two), A sets x (three). One or two undos are a handover or
// a stale write corrected once; three means each side has seen the other
// undo its work and went on. Controllers that fight react to each other's
// watch events, within milliseconds to a backoff's seconds: a minute holds
// three rounds of any fight worth the name, and keeps apart undos that a
// long run's rare, unrelated events bring.
const (
	warUndos  = 3
	warWindow = time.Minute
)

func noWriteWar() Check {
	return Check{
		Name: NoWriteWar, Kind: reports.KindInvariant, Invariant: true,
		Catches: fmt.Sprintf("two controllers of the scenario (the one under test and its others) fighting over one field of one object: %d undos of the field within %v, "+
			"an undo being a successful write that sets the field back to the value it had before another controller changed it (A sets x, B sets y, A sets x again, ...). "+
			"Controllers that write different fields of one object (spec and status, labels of their own) do not fight. "+
			"Fields are read from what each write sent: a patch's fields (merge, strategic merge and apply patches by their leaves, JSON patches by their add, replace and remove operations), "+
			"an update's where it differs from the version it was based on; a list is one field, whole. Creates and deletes are not undos.",
			warUndos, warWindow),
		Reads: "each successful write's body and controller (History.Requests[].Body, .Controller) against the world as seen when it was sent (Requests[].Seen)",
		judge: judgeWriteWar,
	}
}

// fieldKey is one field of one object.
type fieldKey struct {
	object objectKey
	path   string
}

// fieldState is a field as the controllers' writes left it.
type fieldState struct {
	value string // canonical JSON; "" when absent
	by    string // the controller whose write set it
	// before is the value before that write, known when the write, or
	// the version it was based on, said it.
	before      string
	knownBefore bool
	undos       []time.Time // within the window, oldest first
	trail       []string    // the last changes, for the finding
}

func judgeWriteWar(j *judging) {
	fields := map[fieldKey]*fieldState{}
	eachFieldWrite(j.h, func(_ int, q reports.Request, key objectKey, wrote []written) {
		for _, f := range wrote {
			fk := fieldKey{key, f.path}
			st := fields[fk]
			if st == nil {
				fields[fk] = &fieldState{value: f.value, by: q.Controller, before: f.old, knownBefore: f.knownOld,
					trail: []string{fmt.Sprintf("%s set %s", who(q.Controller), show(f.value))}}
				continue
			}
			if f.value == st.value {
				continue // no change: a controller agreeing, or saying it again
			}
			undone := st.by
			undo := undone != q.Controller && st.knownBefore && f.value == st.before
			st.before, st.knownBefore, st.value, st.by = st.value, true, f.value, q.Controller
			st.trail = append(st.trail[max(len(st.trail)-5, 0):], fmt.Sprintf("%s set %s", who(q.Controller), show(f.value)))
			if !undo {
				continue
			}
			st.undos = append(st.undos, q.At)
			for len(st.undos) > 0 && q.At.Sub(st.undos[0]) > warWindow {
				st.undos = st.undos[1:]
			}
			if len(st.undos) >= warUndos {
				subj := reports.Subject{Group: q.Body.Group, Resource: key.resource, Namespace: q.Namespace, Name: q.Name}
				pair := []string{q.Controller, undone}
				slices.Sort(pair) // the controller under test ("") first
				j.find(Finding(NoWriteWar, q.At, subj, &q, fmt.Sprintf("%s and %s undo each other's %s of %s/%s: %d undos within %v (%s)",
					who(pair[0]), who(pair[1]), f.path, key.resource, q.Name, len(st.undos),
					q.At.Sub(st.undos[0]).Round(time.Millisecond), strings.Join(st.trail, ", "))))
				st.undos = nil
			}
		}
	})
}

// eachFieldWrite calls f with each successful patch or update whose body
// the history kept, in order (i its place in Requests), its object, and
// the fields it wrote, read against the observer's copy of the object
// when it was sent.
func eachFieldWrite(h *reports.History, f func(i int, q reports.Request, key objectKey, fields []written)) {
	w := NewSeen(h.Resources)
	for i, q := range h.Requests {
		if !SuccessfulWrite(q) || q.Body == nil || (q.Verb != "patch" && q.Verb != "update") {
			continue
		}
		w.UpTo(h.Events, q.Seen)
		resource, subresource, _ := strings.Cut(q.Resource, "/")
		key := objectKey{resource, q.Namespace, q.Name}
		f(i, q, key, writtenFields(w, q, key, subresource))
	}
}

// who names a controller in a finding.
func who(controller string) string {
	if controller == "" {
		return "the controller under test"
	}
	return "controller " + controller
}

// show is a canonical value as a finding shows it.
func show(v string) string {
	if v == "" {
		return "nothing (removed)"
	}
	if len(v) > 40 {
		return v[:37] + "..."
	}
	return v
}

// written is one field a write set: its path, the value it set and, when
// known, the value before (canonical JSON; "" for none).
type written struct {
	path       string
	at         expect.Path
	value, old string
	knownOld   bool
}

// writtenFields are the fields q (a successful patch or update of key's
// object, or of its subresource) set.
func writtenFields(w *Seen, q reports.Request, key objectKey, subresource string) []written {
	b := q.Body
	var out []written
	switch q.Verb {
	case "patch":
		if len(b.Patch) == 0 {
			return nil
		}
		var doc any
		if json.Unmarshal(b.Patch, &doc) != nil {
			return nil
		}
		current := w.latest[key]
		add := func(p expect.Path, v any, removed bool) {
			path := p.String()
			if ignoredPath(path) || strings.Contains(path, "$") {
				return
			}
			f := written{path: path, at: p}
			if !removed {
				f.value = canonical(v)
			}
			if current != nil {
				f.old, f.knownOld = valueAt(current, p), true
			}
			out = append(out, f)
		}
		switch p := doc.(type) {
		case []any: // a JSON patch
			if types.PatchType(b.PatchType) != types.JSONPatchType {
				return nil
			}
			for _, op := range p {
				m, _ := op.(map[string]any)
				name, _ := m["op"].(string)
				ptr, _ := m["path"].(string)
				if name != "add" && name != "replace" && name != "remove" {
					continue
				}
				add(pointerPath(ptr), m["value"], name == "remove")
			}
		case map[string]any: // merge, strategic merge and apply patches
			walkLeaves(nil, p, func(path expect.Path, v any) { add(path, v, v == nil) })
		}
	case "update":
		if b.Object == nil {
			return nil
		}
		rv, _, _ := unstructured.NestedString(b.Object, "metadata", "resourceVersion")
		base := w.Version(key.resource, key.namespace, key.name, rv)
		if base == nil {
			base = w.latest[key]
		}
		if base == nil {
			return nil // nothing to tell what it changed from
		}
		diffMaps(nil, base, b.Object, func(p expect.Path, old, v any) {
			if path := p.String(); !notWritten(path, subresource) {
				out = append(out, written{path: path, at: p, value: canonical(v), old: canonical(old), knownOld: true})
			}
		})
	}
	return out
}

// canonical is v as JSON, maps' keys sorted: one spelling for a value
// whether a patch (float64) or an object (int64) carried it; "" for nil.
func canonical(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// valueAt is the canonical value at p in obj, through maps only; "" when
// there is none.
func valueAt(obj map[string]any, p expect.Path) string {
	var cur any = obj
	for _, seg := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[seg.Key]
	}
	return canonical(cur)
}

// pointerPath is a JSON pointer (RFC 6901) as a path of keys.
func pointerPath(ptr string) expect.Path {
	var p expect.Path
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		p = append(p, expect.Segment{Key: part, Index: -1})
	}
	return p
}
