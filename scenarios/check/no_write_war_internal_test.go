package check

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// write is one successful write for a synthetic history: by controller,
// after so long, of configmap "c" (or name), with a merge patch, a JSON
// patch or an updated object.
type write struct {
	by     string
	after  time.Duration
	merge  string
	json   string
	update map[string]any
	name   string
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func warHistory(t *testing.T, writes []write) *reports.History {
	t.Helper()
	h := &reports.History{Start: t0}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns", "resourceVersion": "1"},
		"data": map[string]any{"owner": "none", "a": "1"}}
	h.Events = append(h.Events, reports.WatchEvent{At: t0, Type: "ADDED", Resource: "configmaps", Name: "c", Namespace: "ns", RV: "1", Kind: "v1 ConfigMap", Object: obj})
	h.Resources = map[string]string{"configmaps": "v1 ConfigMap"}
	for i, w := range writes {
		name := w.name
		if name == "" {
			name = "c"
		}
		q := reports.Request{At: t0.Add(w.after), Controller: w.by, Verb: "patch", Resource: "configmaps", Namespace: "ns", Name: name, Code: 200,
			Seen: len(h.Events), Instance: i}
		switch {
		case w.merge != "":
			q.Body = &reports.Body{Version: "v1", PatchType: "application/merge-patch+json", Patch: json.RawMessage(w.merge)}
		case w.json != "":
			q.Body = &reports.Body{Version: "v1", PatchType: "application/json-patch+json", Patch: json.RawMessage(w.json)}
		default:
			q.Verb = "update"
			rv := fmt.Sprint(len(h.Events))
			sent := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": rv}, "data": w.update}
			q.Body = &reports.Body{Version: "v1", Object: sent}
		}
		h.Requests = append(h.Requests, q)
		// The observer sees the object as the write left it (its data
		// merged), at the next version.
		next := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": fmt.Sprint(len(h.Events) + 1)}}
		data := map[string]any{}
		for k, v := range h.Events[len(h.Events)-1].Object["data"].(map[string]any) {
			data[k] = v
		}
		switch {
		case w.merge != "":
			var p map[string]map[string]any
			require.NoError(t, json.Unmarshal([]byte(w.merge), &p))
			for k, v := range p["data"] {
				data[k] = v
			}
		case w.update != nil:
			data = w.update
		}
		next["data"] = data
		h.Events = append(h.Events, reports.WatchEvent{At: q.At, Type: "MODIFIED", Resource: "configmaps", Name: name, Namespace: "ns", RV: fmt.Sprint(len(h.Events) + 1),
			Kind: "v1 ConfigMap", Object: next})
	}
	return h
}

func wars(t *testing.T, writes []write) []reports.Finding {
	t.Helper()
	c, err := Compile(Rules{})
	require.NoError(t, err)
	var out []reports.Finding
	for _, f := range c.Judge(warHistory(t, writes), nil).Findings {
		if f.Check == NoWriteWar {
			out = append(out, f)
		}
	}
	return out
}

func owner(v string) string { return fmt.Sprintf(`{"data":{"owner":%q}}`, v) }

func TestWriteWar(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		name   string
		writes []write
		war    bool
	}{
		{"two controllers set one key back and forth", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 2 * s, merge: owner("b")},
			{by: "", after: 3 * s, merge: owner("a")}, {by: "b", after: 4 * s, merge: owner("b")},
			{by: "", after: 5 * s, merge: owner("a")},
		}, true},
		{"two undos are a stale write corrected, not a war", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 2 * s, merge: owner("b")},
			{by: "", after: 3 * s, merge: owner("a")}, {by: "b", after: 4 * s, merge: owner("b")},
		}, false},
		{"each writes its own key, again and again", []write{
			{by: "", after: 1 * s, merge: `{"data":{"a":"1"}}`}, {by: "b", after: 2 * s, merge: `{"data":{"b":"1"}}`},
			{by: "", after: 3 * s, merge: `{"data":{"a":"2"}}`}, {by: "b", after: 4 * s, merge: `{"data":{"b":"2"}}`},
			{by: "", after: 5 * s, merge: `{"data":{"a":"1"}}`}, {by: "b", after: 6 * s, merge: `{"data":{"b":"1"}}`},
		}, false},
		{"one controller's instances flip a key: not between controllers", []write{
			{by: "b", after: 1 * s, merge: owner("x")}, {by: "b", after: 2 * s, merge: owner("y")},
			{by: "b", after: 3 * s, merge: owner("x")}, {by: "b", after: 4 * s, merge: owner("y")}, {by: "b", after: 5 * s, merge: owner("x")},
		}, false},
		{"undos spread wider than the window", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 40 * s, merge: owner("b")},
			{by: "", after: 80 * s, merge: owner("a")}, {by: "b", after: 120 * s, merge: owner("b")},
			{by: "", after: 160 * s, merge: owner("a")},
		}, false},
		{"agreeing on a value is no war", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 2 * s, merge: owner("a")},
			{by: "", after: 3 * s, merge: owner("a")}, {by: "b", after: 4 * s, merge: owner("a")},
			{by: "", after: 5 * s, merge: owner("a")},
		}, false},
		{"a JSON patch and a merge patch fight", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 2 * s, json: `[{"op":"replace","path":"/data/owner","value":"b"}]`},
			{by: "", after: 3 * s, merge: owner("a")}, {by: "b", after: 4 * s, json: `[{"op":"replace","path":"/data/owner","value":"b"}]`},
			{by: "", after: 5 * s, merge: owner("a")},
		}, true},
		{"updates that set the key back", []write{
			{by: "", after: 1 * s, update: map[string]any{"owner": "a", "a": "1"}}, {by: "b", after: 2 * s, update: map[string]any{"owner": "b", "a": "1"}},
			{by: "", after: 3 * s, update: map[string]any{"owner": "a", "a": "1"}}, {by: "b", after: 4 * s, update: map[string]any{"owner": "b", "a": "1"}},
			{by: "", after: 5 * s, update: map[string]any{"owner": "a", "a": "1"}},
		}, true},
		{"updates that each change their own key carry the other's unchanged", []write{
			{by: "", after: 1 * s, update: map[string]any{"owner": "none", "a": "2"}}, {by: "b", after: 2 * s, update: map[string]any{"owner": "b", "a": "2"}},
			{by: "", after: 3 * s, update: map[string]any{"owner": "b", "a": "3"}}, {by: "b", after: 4 * s, update: map[string]any{"owner": "c", "a": "3"}},
			{by: "", after: 5 * s, update: map[string]any{"owner": "c", "a": "2"}}, {by: "b", after: 6 * s, update: map[string]any{"owner": "b", "a": "2"}},
		}, false},
		{"one side keeps undoing what the other sets anew", []write{
			{by: "", after: 1 * s, merge: `{"data":{"owner":"1"}}`}, {by: "b", after: 2 * s, merge: owner("b")},
			{by: "", after: 3 * s, merge: `{"data":{"owner":"2"}}`}, {by: "b", after: 4 * s, merge: owner("b")},
			{by: "", after: 5 * s, merge: `{"data":{"owner":"3"}}`}, {by: "b", after: 6 * s, merge: owner("b")},
			{by: "", after: 7 * s, merge: `{"data":{"owner":"4"}}`}, {by: "b", after: 8 * s, merge: owner("b")},
		}, true},
		{"the fight is over different objects", []write{
			{by: "", after: 1 * s, merge: owner("a")}, {by: "b", after: 2 * s, merge: owner("b"), name: "d"},
			{by: "", after: 3 * s, merge: owner("a")}, {by: "b", after: 4 * s, merge: owner("b"), name: "d"},
			{by: "", after: 5 * s, merge: owner("a")}, {by: "b", after: 6 * s, merge: owner("b"), name: "d"},
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := wars(t, tt.writes)
			if !tt.war {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			f := got[0]
			assert.Equal(t, reports.KindInvariant, f.Kind)
			assert.Equal(t, reports.Subject{Resource: "configmaps", Namespace: "ns", Name: "c"}, f.Subject)
			require.NotNil(t, f.Request, "the finding names the write that made the war")
			assert.Contains(t, f.Detail, "data.owner of configmaps/c")
			assert.Contains(t, f.Detail, "the controller under test and controller b")
		})
	}
}
