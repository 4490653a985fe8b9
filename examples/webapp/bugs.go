package webapp

import (
	"fmt"
	"slices"
)

// Bug is a deliberate defect that makes the operator a mutant. The zero
// value is the correct operator.
type Bug string

// The mutants. Each changes one step of the correct operator.
const (
	// StaleStatus writes the status at the start of a pass, computed from
	// the Deployment as the cache held it before the pass updated it: after
	// a config change it reports the new generation Available while the
	// Deployment still runs the old pods.
	StaleStatus Bug = "stale-status"
	// FinalizerEarly removes the finalizer as soon as deletion is
	// requested and leaves the children to the garbage collector: the
	// WebApp is gone while its children still exist, and no cleanup of the
	// operator's own ever runs.
	FinalizerEarly Bug = "finalizer-early"
	// NoOwner creates the children without owner references: their changes
	// never reach the operator (status stays at zero ready replicas), the
	// finalizer does not recognise them, and nothing deletes them.
	NoOwner Bug = "no-owner"
	// RequeueStorm stamps an annotation on the WebApp on every pass and
	// asks to be requeued at once: the operator never goes quiet.
	RequeueStorm Bug = "requeue-storm"
	// IgnoreConflict treats a 409 Conflict as done instead of retrying: a
	// spec change whose Deployment update conflicts is lost.
	IgnoreConflict Bug = "ignore-conflict"
	// ScaleUpOnly only ever raises the Deployment's replicas: a WebApp
	// scaled down keeps running as many pods as before.
	ScaleUpOnly Bug = "scale-up-only"
	// PortOnCreate sets the Service's port when it creates the Service,
	// never after: a changed spec.port reaches the pods, not the Service.
	PortOnCreate Bug = "port-on-create"
)

// BugInfo describes a mutant.
type BugInfo struct {
	// Name selects the mutant in Options.
	Name Bug
	// Description says what the code does wrong and what it leads to.
	Description string
}

// Bugs lists the mutants.
func Bugs() []BugInfo {
	return []BugInfo{
		{StaleStatus, "writes status before updating the children, from the Deployment the cache held at the start of the pass: " +
			"after a config change the new generation is reported Available while the old pods still run"},
		{FinalizerEarly, "removes the finalizer as soon as deletion is requested, before deleting the children: " +
			"the WebApp is gone while they still exist, and only the garbage collector removes them"},
		{NoOwner, "creates the children without owner references: Deployment changes never trigger a reconcile " +
			"(status never shows the ready pods), and the children outlive the WebApp"},
		{RequeueStorm, "stamps an annotation on the WebApp and requeues on every pass, even when nothing changed: " +
			"it writes for ever"},
		{IgnoreConflict, "drops a pass that hit a 409 Conflict instead of retrying it: a spec change whose Deployment " +
			"update conflicted is never applied"},
		{ScaleUpOnly, "only ever raises the Deployment's replicas: a scale down of the WebApp is never carried out"},
		{PortOnCreate, "sets the Service's port only when it creates the Service: a later change of spec.port reaches the " +
			"pods but not the Service, which sends traffic to a port nothing listens on"},
	}
}

// Options configure the operator.
type Options struct {
	// Bug makes the operator a mutant. Empty is the correct operator.
	Bug Bug
}

// Validate checks that Bug names a mutant, or is empty.
func (o Options) Validate() error {
	if o.Bug == "" || slices.ContainsFunc(Bugs(), func(b BugInfo) bool { return b.Name == o.Bug }) {
		return nil
	}
	return fmt.Errorf("webapp: unknown bug %q", o.Bug)
}
