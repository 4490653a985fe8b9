package mirror

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim"
)

//go:embed config/rbac/*.yaml
var rbacFS embed.FS

// UnderTest is the mirror controller as converge runs it: each instance is
// a Controller on the instance's config (through converge's fault layer,
// as the controller's ServiceAccount), with the instance's leader election,
// and with Bug.
type UnderTest struct {
	Bug Bug
}

var (
	_ scenarios.Controller = UnderTest{}
	_ scenarios.Identified = UnderTest{}
	_ scenarios.ConfigUser = UnderTest{}
)

// Name is "mirror", or "mirror-" and the bug.
func (u UnderTest) Name() string {
	if u.Bug != "" {
		return "mirror-" + string(u.Bug)
	}
	return "mirror"
}

// UsesConfig: both clients are built on the instance's config.
func (UnderTest) UsesConfig() bool { return true }

// Identity is the mirror-controller ServiceAccount with config/rbac.
func (UnderTest) Identity() sim.Identity {
	var objs []runtime.Object
	files, _ := fs.Glob(rbacFS, "config/rbac/*.yaml")
	for _, f := range files {
		data, err := rbacFS.ReadFile(f)
		if err != nil {
			panic(err) // embedded: read at build time
		}
		more, err := sim.DecodeRBAC(f, data)
		if err != nil {
			panic(fmt.Sprintf("mirror: the embedded %s: %v", f, err))
		}
		objs = append(objs, more...)
	}
	return sim.Identity{ServiceAccount: "mirror-controller", RBAC: objs}
}

// New builds one instance.
func (u UnderTest) New(in scenarios.Instance) (scenarios.Runner, error) {
	kube, err := kubernetes.NewForConfig(in.Config)
	if err != nil {
		return nil, err
	}
	mirrors, err := versioned.NewForConfig(in.Config)
	if err != nil {
		return nil, err
	}
	cfg := Config{Namespace: in.Namespace, Bug: u.Bug, CacheTransform: in.CacheTransform}
	if le := in.LeaderElection; le != nil {
		cfg.LeaderElection = &LeaderElection{Namespace: le.Namespace, Name: le.Name, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}
	}
	c, err := New(cfg, kube, mirrors)
	if err != nil {
		return nil, err
	}
	return runner{c}, nil
}

type runner struct{ c *Controller }

func (r runner) Run(ctx context.Context) error { return r.c.Run(ctx) }

// Probe is the controller's own.
func (r runner) Probe() scenarios.Probe {
	depth, busy, reconciles := r.c.Probe()
	return scenarios.Probe{Leading: r.c.Leading(), QueueDepth: depth, Busy: busy, Reconciles: reconciles,
		Retries: r.c.Retries(), CountsRetries: true}
}
