package check

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/expect"
)

// WritesAllowed is judged when the scenario has write rules.
const WritesAllowed = "writes-allowed"

func writesAllowed() Check {
	return Check{
		Name: WritesAllowed, Kind: reports.KindWriteRule, Invariant: true,
		Catches: "a successful write of the controller under test (its Leases and Events aside), or one whose answer it never got (a cancelled request, which the server may have carried out), that no write rule of the scenario allows, by the object it selects, its verb and the fields it changes; judged when the scenario has write rules. The writes of the scenario's other controllers are not the rules' to judge.",
		Reads:   "each such write's body (History.Requests[].Body) against the world as seen when it was sent (Requests[].Seen)",
		judge:   judgeWrites,
	}
}

// judgeWrites judges each successful write, and each whose answer was
// lost, against the write rules, on the world as the observer had seen it
// when the write was sent. A write cancelled in flight (an instance
// stopped as it sent it) may have been carried out: the object it created
// is there, and no later write of the controller need make it again, so
// a rule that selects it has a write to judge.
func judgeWrites(j *judging) {
	if len(j.c.Writes) == 0 {
		return
	}
	w := NewSeen(j.h.Resources)
	for _, q := range j.h.Requests {
		if !SuccessfulWrite(q) && !unansweredWrite(q) || !UnderTest(q) {
			continue
		}
		w.UpTo(j.h.Events, q.Seen)
		j.writeRules(w, q, SuccessfulWrite(q))
	}
}

// writeRules breaks writes-allowed when no write rule allows q. The object
// a rule selects by is the one sent for a create, else the latest version
// seen, or the last one for an object seen deleted already.
//
// A write that got no answer (answered false) is judged only when what it
// sent names its object: a create's body, or an object the observer had
// seen; else nothing says what it would have written.
func (j *judging) writeRules(w *Seen, q reports.Request, answered bool) {
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
	if subject == nil && !answered {
		return
	}
	var changed []string
	switch {
	case q.Verb == "patch" && len(b.Patch) > 0: // else its body could not be read
		patch := []byte(b.Patch)
		var notJSON string // kept as a string (see BodyPatch)
		if json.Unmarshal(patch, &notJSON) == nil {
			patch = []byte(notJSON)
		}
		changed = patchPaths(types.PatchType(b.PatchType), patch)
	case q.Verb == "update" && b.Object != nil:
		// Against the version the update was based on; one the observer
		// had not seen is not judged by field.
		rv, _, _ := unstructured.NestedString(b.Object, "metadata", "resourceVersion")
		if base := w.Version(resource, q.Namespace, q.Name, rv); base != nil {
			changed = diffPaths(base, b.Object, subresource)
		}
	}
	why := ""
	for i, rule := range j.c.Writes {
		if subject == nil || !w.Selects(rule.Select, resource, subject) {
			continue
		}
		j.ruled[i] = true
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
	j.find(Finding(WritesAllowed, q.At, subj, &q, fmt.Sprintf("the controller's %s of %s: %s", q.Verb, what, why)))
}

// BodyPatch is a patch as the history keeps it: JSON as it is, anything
// else as a JSON string (which writes-allowed reads as a patch that is not
// JSON).
func BodyPatch(patch []byte) json.RawMessage {
	if json.Valid(patch) {
		return json.RawMessage(patch)
	}
	s, _ := json.Marshal(string(patch))
	return s
}

// disallowed is the first of paths that fields do not allow, or "".
func disallowed(paths, fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	for _, p := range paths {
		if !slices.ContainsFunc(fields, func(f string) bool { return allows(f, p) }) {
			return p
		}
	}
	return ""
}

// allows: field f allows path p (itself, what lies under it, or with a
// trailing *, anything starting so).
func allows(f, p string) bool {
	switch {
	case f == "*":
		return true
	case strings.HasSuffix(f, `*"]`):
		return strings.HasPrefix(p, strings.TrimSuffix(f, `*"]`))
	case strings.HasSuffix(f, "*"):
		return strings.HasPrefix(p, strings.TrimSuffix(f, "*"))
	}
	if parsed, err := expect.ParsePath(f); err == nil {
		f = parsed.String() // one spelling: a["b"] and a.b are one path
	}
	return p == f || strings.HasPrefix(p, f+".") || strings.HasPrefix(p, f+"[")
}

// patchPaths are the field paths a patch sets.
func patchPaths(pt types.PatchType, patch []byte) []string {
	var doc any
	if err := json.Unmarshal(patch, &doc); err != nil {
		return []string{"(a patch that is not JSON)"}
	}
	var out []string
	switch p := doc.(type) {
	case []any: // JSON patch
		for _, op := range p {
			m, _ := op.(map[string]any)
			ptr, _ := m["path"].(string)
			out = append(out, pointerPath(ptr).String())
		}
	case map[string]any: // merge, strategic merge and apply patches
		walkLeaves(nil, p, func(path expect.Path, _ any) { out = append(out, path.String()) })
	}
	return slices.DeleteFunc(out, ignoredPath)
}

// ignoredPath: fields a write carries that say nothing of what it changes.
func ignoredPath(p string) bool {
	switch p {
	case "metadata.resourceVersion", "metadata.name", "metadata.namespace", "apiVersion", "kind", "metadata.uid":
		return true
	}
	return strings.HasPrefix(p, "metadata.managedFields") || strings.HasPrefix(p, "$")
}

// walkLeaves calls leaf with the path and value of each leaf of m: a value
// that is not a map, or an empty one.
func walkLeaves(prefix expect.Path, m map[string]any, leaf func(expect.Path, any)) {
	for k, v := range m {
		p := append(slices.Clip(prefix), expect.Segment{Key: k, Index: -1})
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			walkLeaves(p, sub, leaf)
			continue
		}
		leaf(p, v)
	}
}

// diffPaths are the field paths an update changes: where old and new
// differ, down to the first map that differs in a leaf or a list. An update
// of the main resource leaves status alone, and of status, everything else.
func diffPaths(old, new map[string]any, subresource string) []string {
	var out []string
	diffMaps(nil, old, new, func(p expect.Path, _, _ any) {
		if path := p.String(); !notWritten(path, subresource) {
			out = append(out, path)
		}
	})
	return out
}

// notWritten: an update of subresource ("" for the object) does not write
// the field at path p, whatever its body says: what the server sets, and
// status for the object, everything else for status.
func notWritten(p, subresource string) bool {
	if ignoredPath(p) || strings.HasPrefix(p, "metadata.generation") || strings.HasPrefix(p, "metadata.creationTimestamp") {
		return true
	}
	inStatus := p == "status" || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[")
	return (subresource == "" && inStatus) || (subresource == "status" && !inStatus)
}

// diffMaps calls differ with each path where a and b differ, down to the
// first map that differs in a leaf or a list, with the value at it in a
// and in b (nil where one has none).
func diffMaps(prefix expect.Path, a, b map[string]any, differ func(p expect.Path, av, bv any)) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		p := append(slices.Clip(prefix), expect.Segment{Key: k, Index: -1})
		av, bv := a[k], b[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		// A map that appears or goes is compared with an empty one, so
		// the keys written are named, not the whole map.
		if aok && bv == nil {
			bm, bok = map[string]any{}, true
		}
		if bok && av == nil {
			am, aok = map[string]any{}, true
		}
		if aok && bok {
			diffMaps(p, am, bm, differ)
			continue
		}
		if len(expect.Match(av, bv)) > 0 || len(expect.Match(bv, av)) > 0 {
			differ(p, av, bv)
		}
	}
}

// unansweredWrite: q is a write of the controller's that got no answer (a
// cancelled request or a lost connection: Code 0), which the server may
// have carried out.
func unansweredWrite(q reports.Request) bool {
	resource, _, _ := strings.Cut(q.Resource, "/")
	return IsWrite(q.Verb) && q.Code == 0 && !Bookkeeping(resource)
}
