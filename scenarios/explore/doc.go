// Package explore finds a controller's bugs that no fault scenario was
// written for, and shrinks failing runs to their cause.
//
// An exploration starts from a fault-free scenario. NewPlan learns from
// its reference runs (References: two as written, two with the controller
// starting late) which fields vary between correct runs, and lists the
// injection points of the first reference's history (Point): one fault
// each, aimed at a moment of that run, pruned of no-ops and repeats. Each
// point runs as a scenario of its own (Plan.ScenarioOf); Plan.Outcome
// judges the run by the scenario's verdict, by its end state against the
// references' under the masks, and by the additions and deletions of the
// objects the controller writes; Plan.Summarise groups what differed into
// findings. Running is the caller's: scenariotest.Explore in a test, and
// converge explore over processes.
//
// Shrinker reduces a failing run's faults with delta debugging, then makes
// each remaining fault simpler, judging a candidate failing if it fails in
// as many of its Tries seeded runs as the starting schedule did.
package explore
