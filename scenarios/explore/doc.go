// Package explore finds a controller's bugs that no fault scenario was
// written for, and shrinks failing runs to their cause.
//
// An exploration starts from a fault-free scenario. NewPlan learns from
// its reference runs (References: two as written, two with the controller
// starting late) what varies between correct runs, and lists the
// injection points of the first reference's history (Point): one fault
// each, aimed at a moment of that run (a restart point adds the
// time-travel its successor starts under: Point.Also), pruned of no-ops
// and repeats. Each
// point runs as a scenario of its own (Plan.ScenarioOf); Plan.Outcome
// judges the run by the scenario's verdict, by its end state against the
// references', by the additions and deletions of the objects the
// controller writes, and by when it converged; Plan.Summarise groups what
// differed into findings. Running is the caller's: scenariotest.Explore in
// a test, and converge explore over processes.
//
// # Noise
//
// What the references disagree on is noise (Noise), never judged: an
// end-state field whose values differ, an object some of them end with
// and others not, a name family (a name less its last dash-separated
// part) whose names differ, an object added or deleted a different number
// of times. A controller that draws delays, choices or names from the
// unseeded math/rand shows it there. When the references disagree on
// anything, more run (MoreReferences), in the same mix of prompt and late
// starts, a batch of the base count at a time, until a batch shows no
// disagreement the earlier ones had not, and at most MaxReferencesFactor
// (3) times the base count: the spread is learnt before any point is
// judged. A deterministic controller's references agree, and only the
// base count runs.
//
// # Liveness
//
// A point's run that converges much later than every reference is a
// finding even when it converges within the deadline: work dropped after
// an error that only a resync or an unrelated event brings back. With
// times from the run's start, a point's run is late when
//
//	converged > latest + spread + fault + backoff + Poll
//
// where latest is the latest time a reference converged, less how much
// later than as written its controller started (a late start is a delay a
// correct controller lived through); spread is how far apart the
// references that started as written converged; fault is how long the
// point's fault held the controller back in that run, from its first
// firing to the end of its effect (its last firing, plus its Retry-After
// or hold; a held-back event's delivery; the informer's relist after a
// watch fault; a successor running and leading after a crash or a
// SIGTERM); backoff is twice the controller's last wait between two
// attempts the fault answered (a backoff that at most doubles tries again
// within that of the fault's end; a single firing allows none); and Poll
// is how often the goal is judged (scenarios.Poll). Every term is read
// from the references or from the point's own run; Lateness records them.
// A late run is a finding only when the controller also idled: its
// longest wait between two requests (its Lease's renewals aside) from the
// fault's first firing until it converged passed the references' longest
// by more than fault + backoff + Poll (a wait before the fault fired is
// the world's, which the references share). A correct controller that a fault moved onto the world's next
// beat (a readiness that flaps on its own schedule) converges late but
// waits no longer than the references did; one that dropped its work
// waits for a resync. The wait is the controller's as a whole: a key
// dropped while other keys keep it busy is not told from work.
//
// Exploration cannot see what pruning left out: a fault on the fourth and
// later writes of one signature does not run, so a bug that shows only
// there is missed.
//
// Shrinker reduces a failing run's faults with delta debugging, then makes
// each remaining fault simpler, judging a candidate failing if it fails in
// as many of its Tries seeded runs as the starting schedule did.
package explore
