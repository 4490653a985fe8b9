package mirror

// Bug names a classic controller bug that Config.Bug plants, so a scenario
// can be checked to expose it.
type Bug string

// The bugs. Each is a small change to the correct code path, marked where
// it is taken.
const (
	// BugNoSourceWatch: no handler links a change of a source ConfigMap to
	// its Mirrors, so targets keep the old data until something else touches
	// the Mirror (there is no resync).
	BugNoSourceWatch Bug = "no-source-watch"
	// BugOrphanTargets: targets are created without an owner reference and
	// adopted by name, so the ones a Mirror stops listing are never deleted
	// and none is garbage collected with the Mirror.
	BugOrphanTargets Bug = "orphan-targets"
	// BugStaleStatus: the status counts every target it tried to write as
	// synced, so it reports Synced=True while a target write failed.
	BugStaleStatus Bug = "stale-status"
	// BugRetryNoBackoff: a failed key is put back with Add, not
	// AddRateLimited: under a persistent error it is retried in a hot loop,
	// as fast as the client's rate limit lets it.
	BugRetryNoBackoff Bug = "retry-no-backoff"
	// BugTombstonePanic: the ConfigMap delete handler type-asserts
	// *corev1.ConfigMap and panics on a cache.DeletedFinalStateUnknown,
	// which an informer delivers when it learns of a delete from a relist.
	BugTombstonePanic Bug = "tombstone-panic"
	// BugStatusFromCache: the status is set on the Mirror the lister
	// returned, not on a copy: the informer's cache then holds a status
	// the server may never accept, and every reader of it is misled.
	BugStatusFromCache Bug = "status-from-cache"
	// BugDeleteByName: a target the Mirror no longer lists is deleted by
	// name, without the UID precondition: acting on a view older than the
	// server's (a restart against a lagging replica), it deletes a
	// ConfigMap that someone else has since created under that name.
	BugDeleteByName Bug = "delete-by-name"
	// BugKeptMirrors: sync reads the Mirror from a map its handlers fill,
	// which nothing empties when a Mirror is deleted: once the Mirror is
	// gone, its targets' deletions bring the old copy back, and the
	// targets are created again, owned by a Mirror that no longer exists.
	BugKeptMirrors Bug = "kept-mirrors"
	// BugTombstoneIgnored: the ConfigMap delete handler handles only a
	// *corev1.ConfigMap and drops a cache.DeletedFinalStateUnknown: a
	// target deleted while the watch was down, which the informer learns
	// of from its relist, is never recreated.
	BugTombstoneIgnored Bug = "tombstone-ignored"
	// BugRemovedTargetsKept: sync creates and updates the targets the
	// Mirror lists and never looks for those it stopped listing: a target
	// taken off spec.targets keeps its copy of the source, owned by the
	// Mirror, until the Mirror is deleted. Only a change of the spec shows
	// it.
	BugRemovedTargetsKept Bug = "removed-targets-kept"
	// BugFirstTarget: the Synced condition's message names the first
	// target, read as spec.targets[0]: a Mirror that lists no target
	// (targets is optional) panics its sync. Only a change of the spec, or
	// a Mirror created without targets, shows it.
	BugFirstTarget Bug = "first-target"
)

// BugInfo describes a Bug.
type BugInfo struct {
	Name        Bug
	Description string
}

// Bugs lists every bug Config.Bug accepts.
func Bugs() []BugInfo {
	return []BugInfo{
		{BugNoSourceWatch, "source ConfigMap changes do not enqueue their Mirrors: targets keep stale data"},
		{BugOrphanTargets, "targets have no owner reference: removed targets stay, none is garbage collected"},
		{BugStaleStatus, "status counts attempted target writes as synced: Synced=True while a write failed"},
		{BugRetryNoBackoff, "failed keys are re-added without rate limiting: a hot retry loop under errors"},
		{BugTombstonePanic, "the ConfigMap delete handler panics on a DeletedFinalStateUnknown tombstone"},
		{BugStatusFromCache, "the status is written on the Mirror the informer's cache holds instead of a copy"},
		{BugTombstoneIgnored, "the ConfigMap delete handler drops a DeletedFinalStateUnknown: a target deleted while the watch was down is never recreated"},
		{BugKeptMirrors, "sync reads Mirrors from a map of its own that no delete empties: after a Mirror's deletion it creates its targets again, for an owner that is gone"},
		{BugDeleteByName, "removed targets are deleted by name, without a UID precondition: from a stale view it deletes a same-named ConfigMap someone else made since"},
		{BugRemovedTargetsKept, "a target taken off spec.targets is never deleted: sync only creates and updates the targets listed"},
		{BugFirstTarget, "the Synced message names spec.targets[0]: a Mirror whose optional targets are removed panics its sync"},
	}
}
