// Package scenarios runs a controller under test through situations
// (scenarios, which are data: a struct or a YAML file), injects their
// faults, and judges the run. Nothing in it is about one controller: a
// scenario names the objects the run holds (any kind, CRDs first), what
// the simulated world and other actors do, CEL invariants checked on every
// observed change (of one object, or across objects at one instant: see
// Invariant), the writes the controller may make, a goal of partial
// objects and conditions that must hold for a settle window after the last
// fault with the controller quiet, and budgets. A controller is anything
// that builds an instance on the clients it is handed (Controller); it may
// declare its RBAC (Identified), which every backend enforces, and bring
// checks of its own (Judged). Manager runs a controller-runtime manager;
// Command runs a binary out of process. Every run leaves a
// reports.Result, written even when the run panics, with the fields its
// invariants and goal name charted per object (reports.Series).
//
// The fault profiles (faults/*.yaml, FaultProfiles) apply to any
// controller's objects: Scenario.Under puts a fault-free scenario under
// one. Package scenariotest runs a folder of scenario files from a user's
// go test; package scaler holds this repository's scaler, its judge and its
// catalogue, which `go test ./scenarios` runs.
//
// Every valid scenario finishes: Validate bounds every count, interval,
// deadline and expression (MaxObjects, MinInterval, MaxDeadline, ...),
// Parse bounds the file itself, and Options.Limit (WallClockLimit) ends a
// run that takes too long in real time as an error. A Result holds the
// scenario it ran (Spec), object files read in, so it replays with nothing
// else at hand.
//
// What it cannot see: the goroutines of a controller run out of process, or
// its queue; on a real cluster, what other actors do to the run's objects.
// Runs on fake replace client-go's error handlers for the
// process with one that only logs (see Run). A controller-runtime manager
// is probed through the process's metrics registry, so two managers running
// at once in one process see each other's queues.
package scenarios
