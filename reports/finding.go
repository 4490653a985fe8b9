package reports

import (
	"fmt"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/text"
)

// Kind is the sort of check a finding comes from.
type Kind string

const (
	// KindInvariant: an invariant, built in or the scenario's, broken.
	KindInvariant Kind = "invariant"
	// KindWriteRule: a write of the controller that no write rule allows.
	KindWriteRule Kind = "write-rule"
	// KindGoal: the goal did not hold for its settle window by the deadline.
	KindGoal Kind = "goal"
	// KindBudget: more writes, reconciles or requests than the scenario
	// budgets.
	KindBudget Kind = "budget"
	// KindUnfired: a fault of the scenario that never fired; the run
	// proves nothing about it.
	KindUnfired Kind = "unfired-fault"
	// KindForbidden: a request of the controller refused with 401 or 403.
	KindForbidden Kind = "forbidden-request"
	// KindLeak: something the controller left running or held after it
	// was stopped.
	KindLeak Kind = "leak"
	// KindPanic: the controller panicked.
	KindPanic Kind = "panic"
	// KindHarness: the run could not be carried out; a verdict on converge
	// or the scenario, not on the controller.
	KindHarness Kind = "harness-error"
	// KindLiveness: the run converged, but much later than fault-free runs
	// of the same world did and after its controller had sent nothing for
	// longer than they ever did: work dropped until a resync or an
	// unrelated event.
	KindLiveness Kind = "liveness"
)

// The checks that are not invariants, as findings name them.
const (
	CheckGoal             = "goal"
	CheckBudgetWrites     = "budget.writes-per-object"
	CheckBudgetReconciles = "budget.reconciles"
	CheckBudgetRequests   = "budget.requests"
	CheckHarness          = "harness"
	CheckFaultsFire       = "faults-fire"
	CheckLiveness         = "liveness"
)

// Subject is the object a finding is about. Empty fields are unknown or
// do not apply (Namespace for a cluster-scoped object).
type Subject struct {
	// Group is the API group, empty for the core group.
	Group string `json:"group,omitempty"`
	// Kind is the object's kind, "Deployment", where the check knew it by
	// kind (an invariant selects by kind); Resource its plural resource,
	// "deployments", where it knew it by resource (a request names one).
	Kind      string `json:"kind,omitempty"`
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// IsZero reports whether s names nothing.
func (s Subject) IsZero() bool { return s == Subject{} }

// String is "deployments/web-1" (by resource, as writes are counted),
// "Deployment web-1" (by kind), or "web-1" when neither is known.
func (s Subject) String() string {
	switch {
	case s.Resource != "" && s.Name != "":
		return s.Resource + "/" + s.Name
	case s.Resource != "":
		return s.Resource
	case s.Kind != "" && s.Name != "":
		return s.Kind + " " + s.Name
	case s.Kind != "":
		return s.Kind
	}
	return s.Name
}

// Finding is one thing a run was found to do wrong, with what it was
// judged on. Sentence renders it for people; programs read its fields.
type Finding struct {
	// Check is the stable name of what found it: an invariant's name,
	// "goal", "budget.writes-per-object", "budget.reconciles",
	// "budget.requests", "harness".
	Check string `json:"check"`
	Kind  Kind   `json:"kind"`
	// Subject is the object it is about, when it is about one.
	Subject Subject `json:"subject,omitzero"`
	// At is when, on the run's clock; zero when it is about the whole run
	// (a budget) or its end.
	At time.Time `json:"at,omitzero"`
	// Request is the request of the controller it follows, where known.
	Request *Request `json:"request,omitempty"`
	// RequestText is the request in words, where a judge gave it only so
	// (scenarios.View.Violate).
	RequestText string `json:"requestText,omitempty"`
	// Firing is the fault firing it follows, where known.
	Firing *chaos.Firing `json:"firing,omitempty"`
	// Count and Limit are a budget's measure and bound: Count writes
	// against a budget of Limit.
	Count int `json:"count,omitempty"`
	Limit int `json:"limit,omitempty"`
	// Within is the goal's deadline.
	Within Duration `json:"within,omitempty"`
	// Key is what a budget of requests counts: "verb resource", or a verb.
	Key string `json:"key,omitempty"`
	// Detail is the check's own account: what an invariant's rule saw,
	// why the goal did not hold, the panic's value, the harness's error.
	Detail string `json:"detail,omitempty"`
}

// Fails reports whether f fails the run. A fault that never fired says
// the run proves nothing about it, and does not.
func (f Finding) Fails() bool { return f.Kind != KindUnfired }

// Sentence is f for people, its instant given from start (the run's
// start on its clock): "invariant max-replicas broken at 1.2s: ...".
func (f Finding) Sentence(start time.Time) string {
	switch f.Kind {
	case KindGoal:
		return fmt.Sprintf("did not converge within %v: %s", time.Duration(f.Within), f.Detail)
	case KindBudget:
		switch f.Check {
		case CheckBudgetWrites:
			return fmt.Sprintf("budget: %d writes of %s, budget %d", f.Count, f.Subject, f.Limit)
		case CheckBudgetReconciles:
			return fmt.Sprintf("budget: %d reconciles, budget %d", f.Count, f.Limit)
		default:
			return fmt.Sprintf("budget: %d %s requests, budget %d", f.Count, f.Key, f.Limit)
		}
	case KindHarness:
		return "the run could not be carried out: " + text.FirstLine(f.Detail)
	case KindUnfired:
		return f.Detail + " never fired"
	case KindLiveness:
		return "converged late: " + f.Detail
	}
	when := "at the end of the run"
	if !f.At.IsZero() {
		when = fmt.Sprintf("at %v", f.At.Sub(start).Round(time.Millisecond))
	}
	return fmt.Sprintf("invariant %s broken %s: %s", f.Check, when, f.Detail)
}

// Sentences renders the findings that fail a run, in order.
func Sentences(findings []Finding, start time.Time) []string {
	var out []string
	for _, f := range findings {
		if f.Fails() {
			out = append(out, f.Sentence(start))
		}
	}
	return out
}

// Violation is f as a result's violations list it, for readers of that
// list: the first breach of an invariant.
func (f Finding) Violation() Violation {
	v := Violation{Invariant: f.Check, At: f.At, Object: f.Subject.Name, Request: f.RequestText, Detail: f.Detail}
	if f.Request != nil {
		v.Request = f.Request.String()
	}
	return v
}
