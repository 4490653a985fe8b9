// Package crd is what the fake API server needs to serve a
// CustomResourceDefinition the way kube-apiserver with apiextensions-apiserver
// 1.37 does. It drives the apiextensions-apiserver libraries rather than
// re-implementing them, so schemas, defaults, pruning, OpenAPI errors and CEL
// rules behave and read as on a real cluster.
//
// For a CRD: [Validate] and [Default] are the create/update checks and
// defaulting, [Established] is the status the server's controllers write once
// the CRD is served. [New] builds a [Kind]: the names and subresources
// discovery and routing need, and per version the structural schema and
// validators. For a custom resource: [Kind.Admit] prunes, defaults and
// validates a write, [Kind.Coerce] prunes and defaults what is read back from
// storage, and [Kind.Convert] moves an object between versions.
//
// The server's paths, in those terms: a write in version v is Admit(v), then
// Convert to the storage version before storing; a read is Coerce of the
// stored object, then Convert to the requested version.
//
// What differs from a real server:
//   - Only the None conversion strategy: New refuses a CRD with Webhook
//     conversion.
//   - Established assumes no other CRD holds the same names; the server would
//     set NamesAccepted=False on a conflict and never establish the CRD.
//   - Admit does not validate metadata (names, labels, ...), nor does it apply
//     what a status or main-resource write may change: the caller does both,
//     the latter before Admit. The server does it between defaulting and
//     validation, so a status whose schema defaults it to {} comes back on a
//     create here. Admit validates the whole object on every write; the server checks a status
//     write against the status schema only, which with ratcheting differs
//     only where an unchanged spec is invalid in a way ratcheting does not
//     forgive.
//   - Unknown fields are pruned silently; Coerce returns their paths for a
//     caller that wants the server's warnings or strict-mode errors.
//   - Malformed metadata, or an apiVersion other than the request's, is a
//     field error here; the server answers 400 Bad Request instead.
//   - A CEL rule that does not compile shows up as an error when it is
//     evaluated, as on the server; Validate reports it at CRD creation.
package crd
