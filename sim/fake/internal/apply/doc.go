// Package apply is server-side apply and managedFields tracking for the fake
// API server. It drives apimachinery's field manager (the one kube-apiserver
// runs on every write) with the type information a real server would use:
// client-go's built-in schema for built-in kinds, the CRD's structural schema
// for custom resources. Nothing here merges objects by hand.
//
// A [Manager] serves one kind in one version. [Manager.Apply] is a PATCH with
// content type application/apply-patch+yaml; [Manager.Update] is any other
// write (create, update, JSON/merge/strategic patch) and records who made it.
// Both leave the objects they are given untouched.
//
// What the caller still does, as the server's handlers and strategies do:
//   - check that the applied name and namespace match the URL (apiVersion
//     and kind are checked here), and that an apply which creates carries no
//     uid;
//   - reset what a write may not change: status on a main-resource write,
//     everything but status on a status write. The field manager only keeps
//     those fields out of the writer's ownership, as on the server;
//   - default, prune and validate the result;
//   - default an empty field manager from the user agent for non-apply
//     writes ([DefaultFieldManager]);
//   - keep old timestamps on a write that changed nothing else
//     ([KeepTimestamps]).
//
// What differs from a real server:
//   - No defaulting inside apply: the server defaults the merged object
//     before it returns from the field manager, here the caller does it
//     afterwards (client-go's scheme has no defaulting functions).
//   - Built-in kinds with both spec and status have a status subresource;
//     a status write may change status only (the server's strategies differ
//     by kind: a Deployment status write may change annotations). Other
//     subresources (scale, resize, ephemeralcontainers, ...) are refused.
//   - managedFields entries recorded in another version of a built-in kind
//     cannot be converted (client-go's scheme has no conversions): an apply
//     to such an object is a 500 and updates leave its managedFields as they
//     were. Custom resources convert the way the None strategy does.
//   - No strict field validation of the apply patch (duplicate keys are not
//     reported as warnings or 400s), and no CBOR apply.
//   - A non-apply write whose object does not fit the schema keeps the live
//     object's managedFields, as on the server, but nothing is logged.
//
// Timestamps come from time.Now, which inside a testing/synctest bubble is
// the bubble's clock, truncated to the second as clients of a real server see
// them. An apply or update that changes nothing records no new time, as on
// the server; [KeepTimestamps] is the server store's last check, for writes
// that only the caller's own changes (a status reset) turn into no-ops.
package apply
