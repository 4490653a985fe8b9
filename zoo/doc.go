// Package zoo is the bug zoo: controllers with one classic bug each, and the
// detection table that shows which scenario of the catalogue catches which.
//
// Every mutant is the same hand-written controller (the kit: informers, a
// rate-limited workqueue, workers, a reconcile that asks the scaler's
// policy through controller.Decide, a conditional merge patch, a cooldown,
// leader election, an orderly shutdown) with one piece replaced by its own
// code, as a developer would have written it. The kit unchanged is the
// control: a scenario that fails the control could not tell a bug from the
// kit. `make zoo` runs every mutant against the fake catalogue, then the
// correct scaler over 200 seeds of every scenario that caught a mutant, and
// writes the table and an HTML report.
//
// The example controllers of examples/ join the zoo with their own
// mutants (Of): each runs through its example's scenarios, alone and
// under every fault profile, with the example's correct controller as its
// control, into a table of its own (TestExamples).
package zoo
