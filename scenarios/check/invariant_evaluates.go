package check

import "github.com/converge-lab/converge/reports"

// InvariantEvaluates breaks when an invariant's rule cannot be evaluated
// for a reason other than a field not being there.
const InvariantEvaluates = "invariant-evaluates"

func invariantEvaluates() Check {
	return Check{
		Name: InvariantEvaluates, Kind: reports.KindInvariant, Invariant: true,
		Catches: "an invariant's rule that cannot be evaluated on an object (a type error, a cost limit) for a reason other than a field not being there.",
		Reads:   "what the invariants read; judged with them",
	}
}
