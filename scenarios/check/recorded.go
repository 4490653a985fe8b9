package check

import "github.com/converge-lab/converge/reports"

// The checks a run records as it happens (History.Recorded), for Judge to
// keep: what they catch cannot be seen in the history afterwards.
const (
	NoPanic         = "no-panic"
	CleanShutdown   = "clean-shutdown"
	NoHotLoop       = "no-hot-loop"
	NoCacheMutation = "no-cache-mutation"
)

func noPanic() Check {
	return Check{
		Name: NoPanic, Kind: reports.KindPanic, Invariant: true,
		Catches: "a panic in the controller: in an instance's Run, or in any goroutine of the process while the run is active.",
		Reads:   "History.Recorded: the harness records it as it happens",
	}
}

func cleanShutdown() Check {
	return Check{
		Name: CleanShutdown, Kind: reports.KindLeak, Invariant: true,
		Catches: "an instance that does not return within 70 s of its context ending, or a controller binary that outlives its grace after SIGTERM or exits uncleanly.",
		Reads:   "History.Recorded: the harness records it as it happens",
	}
}

func noHotLoop() Check {
	return Check{
		Name: NoHotLoop, Kind: reports.KindInvariant, Invariant: true,
		Catches: "a controller that spins: 20,000 requests without the clock moving (or ten per object the scenario creates, if more); or one that creates without end: 2,000 objects created (or twenty per object the scenario creates, if more), its Leases and Events aside. Each controller of the scenario is counted on its own. The run ends there.",
		Reads:   "History.Recorded: the harness records it as it happens, and ends the run",
	}
}

func harness() Check {
	return Check{
		Name: reports.CheckHarness, Kind: reports.KindHarness,
		Catches: "a run the harness could not carry out: a bad scenario, a backend that did not start, a panic in the harness, a run past its wall-clock limit. It is no verdict on the controller.",
		Reads:   "the result's error",
	}
}

func noCacheMutation() Check {
	return Check{
		Name: NoCacheMutation, Kind: reports.KindInvariant, Invariant: true,
		Catches: "a controller that modifies an object its informer's cache holds (a write built on the cached object instead of a copy): which object, which fields, and the write that carried it when there is one. Seen for a controller in process: through Instance.CacheTransform (Manager passes it; a client-go controller gives it to its informers), and on the fake backend's typed client as watch events reach its informers.",
		Reads:   "History.Recorded: the harness records it as it happens",
	}
}
