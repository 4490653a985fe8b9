package check

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
)

// staleHistory is a history of web (UID u) at replicas 2 (resourceVersion
// 10), then 4 (20) and 8 (30), each set by a patch of instance 0 of the
// controller under test (by wrote when it is not empty), and of pod p at
// resourceVersions 5 and 7.
type staleHistory struct {
	h     reports.History
	wrote string // the controller whose patches set 4 and 8
}

func newStaleHistory(wrote string) *staleHistory {
	s := &staleHistory{wrote: wrote}
	s.h.Start = t0
	s.h.Resources = map[string]string{"deployments": "apps/v1 Deployment", "pods": "v1 Pod"}
	s.event("deployments", "web", "u", 10, map[string]any{"spec": map[string]any{"replicas": int64(2)}})
	s.h.Requests = append(s.h.Requests, s.patch(wrote, 0, 4))
	s.event("deployments", "web", "u", 20, map[string]any{"spec": map[string]any{"replicas": int64(4)}})
	s.h.Requests = append(s.h.Requests, s.patch(wrote, 0, 8))
	s.event("deployments", "web", "u", 30, map[string]any{"spec": map[string]any{"replicas": int64(8)}})
	s.event("pods", "p", "pu", 5, nil)
	s.event("pods", "p", "pu", 7, nil)
	return s
}

func (s *staleHistory) event(resource, name, uid string, rv int, fields map[string]any) {
	obj := map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns", "uid": uid, "resourceVersion": strconv.Itoa(rv)}}
	for k, v := range fields {
		obj[k] = v
	}
	s.h.Events = append(s.h.Events, reports.WatchEvent{At: t0, Type: "MODIFIED", Resource: resource, Namespace: "ns", Name: name,
		RV: strconv.Itoa(rv), Object: obj})
}

// patch is a successful merge patch of web's replicas, sent when the
// observer had seen every event so far and the instances had received
// every receipt so far.
func (s *staleHistory) patch(controller string, inst int, replicas int) reports.Request {
	return reports.Request{At: t0.Add(time.Duration(len(s.h.Requests)) * time.Second), Controller: controller, Instance: inst,
		Verb: "patch", Resource: "deployments", Namespace: "ns", Name: "web", Code: 200, UID: "u",
		Seen: len(s.h.Events), Received: len(s.h.Received),
		Body: &reports.Body{Group: "apps", Version: "v1", PatchType: "application/merge-patch+json", Patch: []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))}}
}

// got receives web (or pod p) at rv, in instance inst's view (a list or
// watch) or in the answer to its write.
func (s *staleHistory) got(controller string, inst int, resource string, rv int, answer bool) {
	name, uid := "web", "u"
	if resource == "pods" {
		name, uid = "p", "pu"
	}
	s.h.Received = append(s.h.Received, reports.Receipt{At: t0, Controller: controller, Instance: inst, Resource: resource, Namespace: "ns",
		Name: name, UID: uid, RV: strconv.Itoa(rv), Answer: answer})
}

func TestNoStaleWrite(t *testing.T) {
	for _, tt := range []struct {
		name  string
		wrote string // who set 4 and 8
		build func(s *staleHistory) reports.Request
		found string
	}{
		{"a successor writes from a view before its predecessor's writes", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 10, false)
			s.got("", 0, "deployments", 20, true)
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 10, false) // its lists served from the past
			return s.patch("", 1, 4)
		}, "it set spec.replicas back to 4, a value it had written before that one, over 8, which its controller had set itself and had received at resourceVersion 30; " +
			"its view of the object was at resourceVersion 10"},
		{"its cache had not caught up with its own write", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 10, false)
			s.got("", 0, "deployments", 20, true) // the answer; no watch event yet
			return s.patch("", 0, 2)
		}, "it set spec.replicas back to 2, the value its view held, over 4, which its controller had set itself and had received at resourceVersion 20; " +
			"its view of the object was at resourceVersion 10"},
		// Its view of the object was current: the lagging view of another
		// object is not tied to the write.
		{"only its view of another object was behind another instance's", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "pods", 7, false)
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "pods", 5, false)
			s.got("", 1, "deployments", 30, false)
			return s.patch("", 1, 4)
		}, ""},
		// 16 is neither what its view held (2) nor a value it wrote before.
		{"a new decision from a stale view", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 10, false)
			return s.patch("", 1, 16)
		}, ""},
		// As a finalizer removed at the end: the field goes back to what the
		// object had before the controller's first write, a value neither
		// its view held nor it had written.
		{"an end of its own value that its view did not hold", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 20, false)
			s.got("", 0, "deployments", 30, true)
			return s.patch("", 0, 2)
		}, ""},
		{"a successor whose view was current decided it", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 30, false)
			return s.patch("", 1, 4)
		}, ""},
		{"the value it undid was someone else's", "other", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, false)
			s.got("", 1, "deployments", 10, false)
			return s.patch("", 1, 4)
		}, ""},
		{"a value the object never had", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 10, false)
			return s.patch("", 1, 3)
		}, ""},
		{"another controller's stale view is not this one's", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("other", 0, "deployments", 10, false)
			return s.patch("other", 0, 4)
		}, ""},
		{"a refused write changed nothing", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 10, false)
			q := s.patch("", 1, 4)
			q.Code = 409
			return q
		}, ""},
		{"what it received after sending did not inform it", "", func(s *staleHistory) reports.Request {
			s.got("", 1, "deployments", 10, false)
			q := s.patch("", 1, 4)
			s.got("", 0, "deployments", 30, true)
			return q
		}, ""},
		{"resourceVersions that are not numbers are not judged", "", func(s *staleHistory) reports.Request {
			s.got("", 0, "deployments", 30, true)
			s.got("", 1, "deployments", 10, false)
			for i := range s.h.Received {
				s.h.Received[i].RV = "x" + s.h.Received[i].RV
			}
			return s.patch("", 1, 4)
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStaleHistory(tt.wrote)
			s.h.Requests = append(s.h.Requests, tt.build(s))
			got := receivedFindings(t, &s.h, NoStaleWrite)
			if tt.found == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0].Detail, tt.found)
		})
	}
}

// BenchmarkJudgeLongHistory judges a history of 200 objects written 50
// times each (10,000 patches, events and answers, and 20,000 receipts of
// two instances) with every built-in check.
func BenchmarkJudgeLongHistory(b *testing.B) {
	var h reports.History
	h.Start = t0
	h.Resources = map[string]string{"deployments": "apps/v1 Deployment"}
	rv := 0
	for v := range 50 {
		for o := range 200 {
			rv++
			name, uid := fmt.Sprintf("web-%d", o), fmt.Sprintf("u%d", o)
			at := t0.Add(time.Duration(rv) * time.Millisecond)
			h.Requests = append(h.Requests, reports.Request{At: at, Verb: "patch", Resource: "deployments", Namespace: "ns", Name: name,
				Code: 200, UID: uid, Seen: len(h.Events), Received: len(h.Received),
				Body: &reports.Body{Group: "apps", Version: "v1", PatchType: "application/merge-patch+json", Patch: []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, v))}})
			h.Events = append(h.Events, reports.WatchEvent{At: at, Type: "MODIFIED", Resource: "deployments", Namespace: "ns", Name: name, RV: strconv.Itoa(rv),
				Kind: "apps/v1 Deployment", Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns", "uid": uid, "resourceVersion": strconv.Itoa(rv)},
					"spec": map[string]any{"replicas": int64(v)}}})
			for inst := range 2 {
				h.Received = append(h.Received, reports.Receipt{At: at, Instance: inst, Resource: "deployments", Namespace: "ns", Name: name, UID: uid,
					RV: strconv.Itoa(rv), Answer: inst == 0})
			}
		}
	}
	c, err := Compile(Rules{})
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		c.Judge(&h, nil)
	}
}
