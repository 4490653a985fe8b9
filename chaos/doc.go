// Package chaos is converge's fault model and its injectors.
//
// A Fault is a small value: what it does and which requests it targets.
// An Injection pairs a fault with when it fires (a time window from the
// start of the run, the k-th matching request, or a probability drawn from
// the run's seed); a Plan is the injections of a run. The same seed gives
// the same firings at the same requests.
//
// Injectors apply a plan at one layer:
//   - HTTP (this package): a RoundTripper installed with rest.Config.Wrap,
//     for in-process controllers talking to a real API server. Faulted
//     clients speak JSON (Configure sets it), so watch streams can be
//     decoded frame by frame, dropped, delayed, duplicated, cut or ended
//     with a 410, and re-encoded; error answers carry real metav1.Status
//     bodies, and the REST client reacts to them as to the server's own
//     (429 and 5xx with Retry-After are retried by it).
//
// Every firing is reported to a Recorder, for the run's history.
//
// What this layer cannot do: it sees only the traffic of the clients it is
// installed in (the controller's, never the observer's), so it cannot make
// the server itself slow or lose data; faults on other layers (the fake
// clientset's reactors, the TLS proxy for out-of-process controllers,
// process crashes and SIGTERM) are not implemented yet.
package chaos
