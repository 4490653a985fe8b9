package reports_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
)

// TestFindingSentences: each kind renders as the sentence a run's reasons
// have always held, from its fields alone.
func TestFindingSentences(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	web := reports.Subject{Group: "apps", Resource: "deployments", Namespace: "demo", Name: "web-1"}
	for _, tt := range []struct {
		f    reports.Finding
		want string
	}{
		{reports.Finding{Check: "max-replicas", Kind: reports.KindInvariant, Subject: web, At: start.Add(1234567 * time.Microsecond), Detail: "web-1 has 12 replicas"},
			"invariant max-replicas broken at 1.235s: web-1 has 12 replicas"},
		{reports.Finding{Check: "clean-shutdown", Kind: reports.KindLeak, Detail: "2 goroutines left"},
			"invariant clean-shutdown broken at the end of the run: 2 goroutines left"},
		{reports.Finding{Check: "no-forbidden-request", Kind: reports.KindForbidden, At: start.Add(300 * time.Millisecond),
			Request: &reports.Request{Verb: "list", Resource: "pods", Code: 403}, Detail: "the controller's list pods was refused with 403"},
			"invariant no-forbidden-request broken at 300ms: the controller's list pods was refused with 403"},
		{reports.Finding{Check: "goal", Kind: reports.KindGoal, Within: reports.Duration(90 * time.Second), Detail: "web-1: 2 of 3 ready"},
			"did not converge within 1m30s: web-1: 2 of 3 ready"},
		{reports.Finding{Check: "budget.writes-per-object", Kind: reports.KindBudget, Subject: reports.Subject{Resource: "deployments", Name: "web-1"}, Count: 9, Limit: 4},
			"budget: 9 writes of deployments/web-1, budget 4"},
		{reports.Finding{Check: "budget.reconciles", Kind: reports.KindBudget, Count: 300, Limit: 200},
			"budget: 300 reconciles, budget 200"},
		{reports.Finding{Check: "budget.requests", Kind: reports.KindBudget, Key: "list pods", Count: 31, Limit: 30},
			"budget: 31 list pods requests, budget 30"},
		{reports.Finding{Check: "harness", Kind: reports.KindHarness, Detail: "backend envtest did not start\nmore"},
			"the run could not be carried out: backend envtest did not start"},
	} {
		assert.Equal(t, tt.want, tt.f.Sentence(start), "%+v", tt.f)
	}
	assert.Equal(t, "deployments/web-1", web.String())
	assert.Equal(t, "Deployment web-1", reports.Subject{Group: "apps", Kind: "Deployment", Name: "web-1"}.String())
}

// TestUnfiredFaultDoesNotFail: a fault that never fired is a finding that
// the run proves nothing about it, not a failure.
func TestUnfiredFaultDoesNotFail(t *testing.T) {
	unfired := reports.Finding{Check: reports.CheckFaultsFire, Kind: reports.KindUnfired, Detail: "fault 2 (conflict on deployments)"}
	assert.Equal(t, "fault 2 (conflict on deployments) never fired", unfired.Sentence(time.Time{}))
	goal := reports.Finding{Check: "goal", Kind: reports.KindGoal, Within: reports.Duration(time.Minute), Detail: "not ready"}
	assert.False(t, unfired.Fails())
	assert.True(t, goal.Fails())
	assert.Equal(t, []string{"did not converge within 1m0s: not ready"}, reports.Sentences([]reports.Finding{unfired, goal}, time.Time{}))
}

// TestFindingJSON: a finding keeps its fields through JSON, and leaves out
// those that do not apply.
func TestFindingJSON(t *testing.T) {
	at := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	in := reports.Finding{Check: "no-hot-loop", Kind: reports.KindInvariant, At: at,
		Subject: reports.Subject{Resource: "deployments", Namespace: "demo", Name: "web"},
		Firing:  &chaos.Firing{At: at, Fault: "conflict", Request: "patch deployments demo/web", Outcome: "answered 409"},
		Detail:  "52 writes in 1s"}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	var out reports.Finding
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, in, out)

	data, err = json.Marshal(reports.Finding{Check: "budget.reconciles", Kind: reports.KindBudget, Count: 3, Limit: 2})
	require.NoError(t, err)
	assert.JSONEq(t, `{"check":"budget.reconciles","kind":"budget","count":3,"limit":2}`, string(data))
}
