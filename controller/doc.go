// Package controller is the scaler: the reference controller that converge
// runs its scenarios against.
//
// The scaler manages Deployments that opt in with the label
// converge.dev/scaler=enabled. When fewer than half of a Deployment's desired
// pods are ready (2*ready < desired), it doubles spec.replicas, up to a
// per-Deployment ceiling (annotation converge.dev/max-replicas, default 10).
// It never scales down and never touches a Deployment its owner scaled to 0.
// After a scale it waits until the Deployment's status has observed the new
// generation and a cooldown has passed, so pods that are still starting do
// not trigger another doubling.
//
// The controller is a library first: New takes a Config and any
// kubernetes.Interface (a real clientset, a fake one, or one wrapped with
// faults) and Run blocks until its context ends, then shuts down in order:
// not ready, queue shut down, in-flight reconciles drained (bounded by
// Config.ShutdownGrace), Lease released, informers stopped. Every goroutine
// it started has ended when Run returns.
//
// What it cannot do: it reads readiness only from Pods (not from
// Deployment status), it does not scale StatefulSets or other workloads,
// and it keeps no state across restarts beyond the converge.dev/last-scale
// annotation it writes.
package controller
