package envtest

// PID is the pid of the plane's component of that name (etcd,
// kube-apiserver, kube-controller-manager), for tests that kill it.
func (cp *ControlPlane) PID(component string) int {
	for _, c := range cp.components() {
		if c.name == component {
			return c.pid()
		}
	}
	return 0
}

// ControllerManagerKubeconfig is the path of the kubeconfig
// kube-controller-manager is started with.
func (cp *ControlPlane) ControllerManagerKubeconfig() string {
	for _, a := range cp.kcm.args {
		if len(a) > len("--kubeconfig=") && a[:len("--kubeconfig=")] == "--kubeconfig=" {
			return a[len("--kubeconfig="):]
		}
	}
	return ""
}

// SetAPIServerPort makes the API server's port, at a start's attempt,
// port(attempt) (0: envtest's choice) until the test ends.
func SetAPIServerPort(t interface{ Cleanup(func()) }, port func(attempt int) int) {
	apiserverPort = port
	t.Cleanup(func() { apiserverPort = func(int) int { return 0 } })
}
