package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// receivedFindings judges h with no rules and returns the findings of
// check.
func receivedFindings(t *testing.T, h *reports.History, check string) []reports.Finding {
	t.Helper()
	c, err := Compile(Rules{})
	require.NoError(t, err)
	var out []reports.Finding
	for _, f := range c.Judge(h, nil).Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

func receipt(inst int, name, uid string, deleted bool) reports.Receipt {
	return reports.Receipt{At: t0, Instance: inst, Resource: "configmaps", Namespace: "ns", Name: name, UID: uid, Deleted: deleted}
}

func TestNoBlindDelete(t *testing.T) {
	del := func(inst, received int, uid string) reports.Request {
		return reports.Request{At: t0.Add(time.Second), Instance: inst, Verb: "delete", Resource: "configmaps", Namespace: "ns", Name: "c",
			Code: 200, Received: received, UID: uid}
	}
	for _, tt := range []struct {
		name     string
		received []reports.Receipt
		request  reports.Request
		found    bool
	}{
		{"deletes the version it received", []reports.Receipt{receipt(0, "c", "u1", false)}, del(0, 1, "u1"), false},
		{"removes a replacement it never received", []reports.Receipt{receipt(0, "c", "u1", false)}, del(0, 1, "u2"), true},
		{"had received the replacement too", []reports.Receipt{receipt(0, "c", "u1", false), receipt(0, "c", "u2", false)}, del(0, 2, "u2"), false},
		// What arrived after the delete was sent did not inform it.
		{"received the replacement only after sending", []reports.Receipt{receipt(0, "c", "u1", false), receipt(0, "c", "u2", false)}, del(0, 1, "u2"), true},
		// Another instance's view is not this one's.
		{"another instance had received it", []reports.Receipt{receipt(1, "c", "u2", false), receipt(0, "c", "u1", false)}, del(0, 2, "u2"), true},
		{"a name it had never received is not judged", []reports.Receipt{receipt(0, "other", "u9", false)}, del(0, 1, "u2"), false},
		{"a refused delete removed nothing", []reports.Receipt{receipt(0, "c", "u1", false)},
			func() reports.Request { q := del(0, 1, "u2"); q.Code = 409; return q }(), false},
		{"an answer without a UID says nothing", []reports.Receipt{receipt(0, "c", "u1", false)}, del(0, 1, ""), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &reports.History{Start: t0, Received: tt.received, Requests: []reports.Request{tt.request}}
			got := receivedFindings(t, h, NoBlindDelete)
			if !tt.found {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0].Detail, "instance 0 deleted configmaps/c with UID u2, which it had never received")
		})
	}
}

func TestNoChildOfDeletedOwner(t *testing.T) {
	create := func(inst, received int, ownerUID, uid string) reports.Request {
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "child", "namespace": "ns",
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": ownerUID, "controller": true}}}}
		return reports.Request{At: t0.Add(time.Second), Instance: inst, Verb: "create", Resource: "configmaps", Namespace: "ns", Name: "child",
			Code: 201, Received: received, UID: uid, Body: &reports.Body{Version: "v1", Object: obj}}
	}
	// At the instant of the owner's deletion: its cache may not have
	// applied it.
	now := func(q reports.Request) reports.Request { q.At = t0; return q }
	owner := receipt(0, "owner", "o1", false)
	gone := receipt(0, "owner", "o1", true)
	child := func(inst int, uid string, deleted bool) reports.Receipt { return receipt(inst, "child", uid, deleted) }
	for _, tt := range []struct {
		name     string
		received []reports.Receipt
		requests []reports.Request
		found    bool
	}{
		{"owner alive in its view", []reports.Receipt{owner}, []reports.Request{create(0, 1, "o1", "c1")}, false},
		// The informers' race: the owner's deletion had reached one, not
		// the cache the pass read.
		{"once, after the owner's deletion", []reports.Receipt{owner, gone}, []reports.Request{create(0, 2, "o1", "c1")}, false},
		{"again after the collector deleted the first", []reports.Receipt{owner, gone, child(0, "c1", false), child(0, "c1", true)},
			[]reports.Request{create(0, 2, "o1", "c1"), create(0, 4, "o1", "c2")}, true},
		{"again, before hearing of the first one's deletion", []reports.Receipt{owner, gone, child(0, "c1", false), child(0, "c1", true)},
			[]reports.Request{create(0, 2, "o1", "c1"), create(0, 3, "o1", "c2")}, false},
		{"again, the owner's deletion received after the first", []reports.Receipt{owner, child(0, "c1", false), gone, child(0, "c1", true)},
			[]reports.Request{create(0, 1, "o1", "c1"), create(0, 4, "o1", "c2")}, false},
		{"again, within the instant the owner's deletion arrived", []reports.Receipt{owner, gone, child(0, "c1", false), child(0, "c1", true)},
			[]reports.Request{now(create(0, 2, "o1", "c1")), now(create(0, 4, "o1", "c2"))}, false},
		{"another instance received the deletions", []reports.Receipt{owner, receipt(1, "owner", "o1", true), child(1, "c1", true)},
			[]reports.Request{create(0, 3, "o1", "c1"), create(0, 3, "o1", "c2")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &reports.History{Start: t0, Received: tt.received, Requests: tt.requests}
			got := receivedFindings(t, h, NoChildOfDeletedOwner)
			if !tt.found {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0].Detail, "created configmaps/child again, owned by ConfigMap owner (UID o1), whose deletion it had received, after it had received the deletion of the one it made before (UID c1)")
		})
	}
}
