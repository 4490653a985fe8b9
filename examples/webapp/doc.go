// Package webapp is an example operator built with controller-runtime, laid
// out as kubebuilder lays one out, for converge to test: a controller under
// test for users to try converge on, and for converge's own tests.
//
// A WebApp (examples.converge.dev/v1alpha1, in api/v1alpha1) asks for a
// web server; the operator runs it as three children named after it: a
// Deployment, a Service and a ConfigMap (<name>-config). It shows what a
// well-behaved operator does and what converge checks:
//
//   - children are created or updated only when they differ from the spec,
//     and carry controller owner references, so their changes come back as
//     events and the garbage collector removes them;
//   - status (observedGeneration, readyReplicas, the Available and
//     Progressing conditions, the config's hash) is written only when it
//     changed, through the status subresource, with the resourceVersion of
//     the object just read, so a stale write fails with 409 and is retried;
//   - a finalizer deletes the children explicitly, as an operator whose
//     cleanup reaches outside the cluster must, and is removed only once
//     they are gone;
//   - errors are returned for retry with backoff; a pass that changes
//     nothing writes nothing, so a converged operator is quiet;
//   - it needs only the Role in config/rbac, in one namespace: its cache can
//     be limited to that namespace.
//
// Options.Bug turns it into a mutant with one classic bug (see Bugs): the
// cases converge must catch.
//
// What it does not do: it serves one namespace (its RBAC is a Role); it
// adopts an object of a child's name that no controller controls, and
// fails (with retries) on one that another controls; it rolls pods only
// through the Deployment's own strategy; and it judges readiness by the
// Deployment's status alone.
//
// config/crd holds the CustomResourceDefinition and config/rbac the
// ServiceAccount, Role and RoleBinding, as backends install them. The tests
// run the operator in virtual time on converge's fake backend, with the
// world simulator playing the Deployment controller, scheduler and kubelet,
// and on envtest where its binaries are built. They show each mutant's bug,
// and that the Role lacks nothing and, apart from what the fake cannot
// exercise, grants nothing unused.
package webapp
