// Package sim defines the backends a scenario runs on and what a running
// one offers. Backends live in sub-packages: sim/fake (an in-memory API
// server, reached through client-go's fake clientset or an in-process
// rest.Config, in virtual time), sim/envtest
// (a real kube-apiserver, etcd and kube-controller-manager) and sim/cluster
// (any kubeconfig).
//
// A backend starts and stops like envtest: Start(ctx) returns an Env, Stop
// tears it down. The Env says what the backend can and cannot do, so a
// scenario that needs, say, an API server restart is skipped on fake with
// a reason instead of passing vacuously.
package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	fakeclientset "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// Backend is one kind of world a scenario runs in.
type Backend interface {
	// Name is its kind's name (Kind.Name).
	Name() string
	// Start brings the backend up and returns what a run needs.
	Start(ctx context.Context) (*Env, error)
	// Stop tears down what Start brought up. It is safe to call twice.
	Stop() error
}

// Env is a running backend, as one run sees it.
type Env struct {
	// Backend is the backend's name.
	Backend string
	// Namespace is the namespace this run owns.
	Namespace string
	// RESTConfig reaches the API server with full rights: on fake, the
	// in-memory API's REST door, in process. Controllers under test get
	// clients from ControllerConfig instead.
	RESTConfig *rest.Config
	// ControllerConfig reaches the API server as the controller under test:
	// with the scaler's RBAC from config/, not as an administrator (on fake,
	// which has no RBAC, with full rights). The chaos layer wraps its
	// transport.
	ControllerConfig *rest.Config
	// ControllerClient is the controller's clientset on fake, where there is
	// no server to build one from; the chaos layer adds its reactors to it.
	// Nil on real backends.
	ControllerClient kubernetes.Interface
	// Observer is an unfaulted client with full rights, for the harness's
	// god view and for the world simulator.
	Observer kubernetes.Interface
	// ControlPlane restarts the API server and compacts its storage, where
	// the backend can (Can has APIServerRestart); nil elsewhere. The chaos
	// package's control-plane faults act on it.
	ControlPlane ControlPlane
	// InProcess makes the in-process API's own clientsets, where the API
	// lives in this process (fake); nil elsewhere.
	InProcess InProcess
	// RESTMapper is the API's REST mapping read in process, where the API
	// lives in this process (fake): the answers discovery gives, without
	// its requests. Nil elsewhere: ask discovery.
	RESTMapper meta.ResettableRESTMapper
	// Can lists what this backend can do.
	Can Capabilities
}

// InProcess is an API server living in this process, as a run reaches it
// without HTTP.
type InProcess interface {
	// NewControllerClient is a clientset for one controller instance: the
	// chaos layer adds its reactors to it.
	NewControllerClient() (*fakeclientset.Clientset, error)
	// NewSharingClient is a clientset whose watchers share each event's
	// object instead of copying it, for readers that never change what they
	// read (the world simulator).
	NewSharingClient() (*fakeclientset.Clientset, error)
}

// ControlPlane is a backend's API server and storage, as faults see them.
type ControlPlane interface {
	// RestartAPIServer stops the API server and starts it again on the same
	// address and storage.
	RestartAPIServer(ctx context.Context) error
	// Compact compacts the storage's history up to its current revision.
	Compact(ctx context.Context) error
}

// Capability is one thing a backend may or may not be able to do.
type Capability string

// Capabilities a scenario may require.
const (
	// VirtualTime: the run can live in a testing/synctest bubble.
	VirtualTime Capability = "virtual-time"
	// RealAPIServer: requests cross HTTP to a kube-apiserver, so transport
	// faults (HTTP 410/429/5xx, latency, partitions, a TLS proxy) apply.
	RealAPIServer Capability = "real-apiserver"
	// RealControllers: kube-controller-manager runs the Deployment,
	// ReplicaSet and garbage collector controllers.
	RealControllers Capability = "real-controllers"
	// NodeLifecycle: a node lifecycle controller marks a Node NotReady when
	// no kubelet renews its heartbeat and evicts its pods, so the world
	// keeps its simulated Nodes alive.
	NodeLifecycle Capability = "node-lifecycle"
	// APIServerRestart: the backend can stop and start its kube-apiserver.
	APIServerRestart Capability = "restart-apiserver"
	// EtcdCompaction: the backend can compact etcd, producing real 410s.
	EtcdCompaction Capability = "etcd-compaction"
	// OutOfProcess: a controller binary can run against it (a kubeconfig
	// exists).
	OutOfProcess Capability = "out-of-process"
	// KwokNodes: the cluster is a kwokctl cluster of the harness's own
	// (sim/kwok): it has no Nodes but a run's simulated ones, kwok holds
	// their Leases and kube-scheduler places every pod on them. The world
	// then neither schedules nor renews Leases, and leaves its Nodes
	// untainted.
	KwokNodes Capability = "kwok-nodes"
)

// Capabilities maps each capability to whether the backend has it, and why
// not when it does not.
type Capabilities map[Capability]string

// Has reports whether c is available.
func (cs Capabilities) Has(c Capability) bool {
	why, ok := cs[c]
	return ok && why == ""
}

// Missing returns an error naming each capability of need the backend lacks,
// with its reason, or nil.
func (cs Capabilities) Missing(need ...Capability) error {
	var reasons []string
	for _, c := range need {
		if cs.Has(c) {
			continue
		}
		why := cs[c]
		if why == "" {
			why = "not provided"
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s", c, why))
	}
	if len(reasons) == 0 {
		return nil
	}
	sort.Strings(reasons)
	return fmt.Errorf("backend lacks %s", strings.Join(reasons, "; "))
}
