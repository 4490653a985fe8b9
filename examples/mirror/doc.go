// Package mirror is an example controller for converge to test: a client-go
// controller in the style of kubernetes/sample-controller, for a custom
// resource with a generated clientset, informers and listers.
//
// A Mirror (examples.converge.dev/v1alpha1, see api/v1alpha1) names a source
// ConfigMap and target ConfigMaps in its namespace. The controller keeps
// every target's data equal to the source's, owns the targets (a controller
// owner reference, so the garbage collector deletes them with the Mirror),
// deletes the targets the Mirror no longer lists, and reports in the
// Mirror's status how many targets hold the data and a Synced condition.
// It never takes over a ConfigMap it does not own, and it touches no target
// while the source is missing.
//
// The example shows what converge needs from a controller under test: New
// takes a Config and clients built from any rest.Config (the harness's, with
// its faults and its ServiceAccount's RBAC), Run blocks until its context
// ends and returns only when every goroutine it started has ended, so it
// runs in a testing/synctest bubble, and Probe lets the harness sample the
// queue without a metrics server. config/ holds the CRD and the
// least-privilege RBAC. Config.Bug plants one of a few classic controller
// bugs (see Bugs), for checking that a scenario exposes them.
//
// What it cannot do: it serves one namespace (its RBAC is a Role), it caches
// every ConfigMap of that namespace, and it does not resync: it relies on
// watch events alone, as most controllers do.
package mirror
