package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

// A write failed by a fault must be followed, within RetryWithin, by a
// retry the probe counts; a failure the server made itself, one past the
// run's end, and one of a controller whose probe counts no retries (or
// has no probe) are not judged.
func TestRetriesFailedWrites(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	failed := reports.Request{At: at(time.Second), Verb: "patch", Resource: "deployments", Namespace: "ns", Name: "web", Code: 409}
	firing := chaos.Firing{At: failed.At, Fault: "conflict", Request: "patch deployments ns/web", Outcome: "answered 409 Conflict"}
	event := reports.Request{At: at(time.Second), Verb: "create", Resource: "events", Namespace: "ns", Name: "web.1", Code: 503}
	eventFiring := chaos.Firing{At: event.At, Fault: "server-error", Request: "create events ns/web.1", Outcome: "answered 503 Service Unavailable"}
	again := failed // a create retried finds the object made
	again.Verb, again.At, again.Code = "update", at(3*time.Second), 200
	sample := func(d time.Duration, retries int64, counts bool) reports.Sample {
		return reports.Sample{At: at(d), Retries: retries, CountsRetries: counts}
	}
	polls := []reports.Poll{{At: at(0)}, {At: at(time.Minute)}}
	for _, tc := range []struct {
		name    string
		h       reports.History
		dropped bool
	}{
		{"retry counted", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 0, true), sample(1100*time.Millisecond, 1, true)}, Polls: polls}, false},
		{"retry counted by a sample taken at the failure's instant", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 0, true), sample(time.Second, 1, true)}, Polls: polls}, false},
		{"no retry counted, the object written again on an event", reports.History{Requests: []reports.Request{failed, again}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 2, true), sample(20*time.Second, 3, true)}, Polls: polls}, true},
		{"a probe that does not count retries", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 0, false)}, Polls: polls}, false},
		{"a create's AlreadyExists, the server's own 409", reports.History{
			Requests: []reports.Request{{At: failed.At, Verb: "create", Resource: "configmaps", Namespace: "ns", Name: "a", Code: 409,
				Error: `configmaps "a" already exists`}},
			Faults:  []chaos.Firing{{At: failed.At, Fault: "conflict", Request: "create configmaps ns/a", Outcome: "answered 409 Conflict"}},
			Samples: []reports.Sample{sample(0, 0, true)}, Polls: polls}, false},
		{"the server's own conflict", reports.History{Requests: []reports.Request{failed},
			Samples: []reports.Sample{sample(0, 0, true)}, Polls: polls}, false},
		{"the run ends first", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 0, true)}, Polls: polls[:1]}, false},
		{"the instance ends first", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing},
			Samples: []reports.Sample{sample(0, 0, true)}, Polls: polls, Lives: []reports.Life{{Started: t0, Ended: at(2 * time.Second)}}}, false},
		{"an Event, best effort", reports.History{Requests: []reports.Request{event}, Faults: []chaos.Firing{eventFiring},
			Samples: []reports.Sample{sample(0, 0, true)}, Polls: polls}, false},
		{"no probe", reports.History{Requests: []reports.Request{failed}, Faults: []chaos.Firing{firing}, Polls: polls}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(Rules{})
			require.NoError(t, err)
			v := c.Judge(&tc.h, nil)
			var got []reports.Finding
			for _, f := range v.Findings {
				if f.Check == RetriesFailedWrites {
					got = append(got, f)
				}
			}
			if !tc.dropped {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, failed.At, got[0].At)
			assert.Contains(t, got[0].Detail, "instance 0's patch deployments web met an injected 409, and in the 10s after it the instance counted no retry")
		})
	}
}
