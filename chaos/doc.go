// Package chaos is converge's fault model and its injectors.
//
// A Fault is a small value: what it does and which requests it targets.
// An Injection pairs a fault with when it fires (a time window from the
// start of the run, the k-th matching request, or a probability drawn from
// the run's seed); a Plan is the injections of a run. The same seed gives
// the same firings at the same requests.
//
// Injectors apply a plan at one layer:
//
//   - HTTP (this package): a RoundTripper installed with rest.Config.Wrap,
//     for in-process controllers talking to a real API server. Faulted
//     clients speak JSON (Configure sets it), so watch streams can be
//     decoded frame by frame, dropped, delayed, duplicated, cut or ended
//     with a 410, and re-encoded; error answers carry real metav1.Status
//     bodies, and the REST client reacts to them as to the server's own
//     (429 and 5xx with Retry-After are retried by it).
//
//   - Proxy (NewProxy): a TLS reverse proxy on 127.0.0.1 with its own
//     certificate, forwarding with the upstream config's credentials through
//     an injector, and writing a kubeconfig that points at it, so a
//     controller in another process meets the same faults. It asks the
//     server for JSON whatever the client prefers. A partition there is a
//     connection the proxy closes, not a refused dial.
//
//   - Clientset (InstallFake): a reactor ahead of a fake clientset's chain for the
//     request faults, and a proxy around the watches its chain returns for
//     the watch faults. There is no REST client there, so a 429 or a 5xx
//     with Retry-After is not retried by the client but reaches the caller:
//     those faults say so in Available(Clientset) and InstallFake refuses them.
//
// A Crash is a process fault on both layers: right after the matching
// request, the instance's client is fenced (every request refused, open
// watches broken, as for a dead process) and Plan.OnCrash tells the harness
// to stop the instance without a drain. A Terminate asks for the graceful
// path instead (Plan.OnTerminate: SIGTERM for a binary, the end of Run's
// context in-process). Install one injector per instance.
//
// Every firing is reported to a Recorder, for the run's history.
//
// APIServerRestart and Compaction act on the backend's control plane
// (Plan.ControlPlane): triggered by a request like a Crash, or scheduled
// from the start of the run (Injector.Start). StartProcess runs a
// controller binary, whose Terminate and Kill are a real SIGTERM and
// SIGKILL for the proxy's Terminate and Crash faults, recording its exit.
//
// What these layers cannot do: they see only the traffic of the clients
// they are installed in (the controller's, never the observer's), so they
// cannot make the server itself slow or lose data.
package chaos
