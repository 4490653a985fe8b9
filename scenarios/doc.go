// Package scenarios runs the controller under test through situations
// (scenarios, which are data: a struct or a YAML file), injects their
// faults, and judges the run: invariants checked on every observed change,
// a convergence goal that must hold for a settle window before a deadline,
// and budgets on writes, reconciles and requests. Every run leaves a
// reports.Result, written even when the run panics.
//
// The catalogue (catalogue/*.yaml, embedded) is run by `go test
// ./scenarios`: every scenario on the fake backend in virtual time, and on
// envtest when its binaries exist (required under CI). Subtests are named
// scenario/backend/seed-N, so -run picks one run; a failing run prints the
// command that replays it.
//
// Every valid scenario finishes: Validate bounds every count, interval and
// deadline (MaxDeployments, MinInterval, MaxDeadline, ...), Parse bounds the
// file itself, and Options.Limit (WallClockLimit) ends a run that takes too
// long in real time as an error. A Result holds the scenario it ran (Spec),
// so it replays with nothing else at hand.
//
// What it cannot see: the goroutines of a controller run out of process, or
// its queue; on a real cluster, what other actors do to the run's objects.
package scenarios
