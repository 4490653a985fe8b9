package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/kwok"
)

// Kind is the cluster backend as a kind: each run gets a namespace of its
// own on the invocation's cluster (sim.Setup): a kubeconfig, or a kwokctl
// cluster's folder, or one started for the invocation ("start").
type Kind struct{}

var (
	_ sim.Kind        = Kind{}
	_ sim.ClusterUser = Kind{}
)

// Name is "cluster".
func (Kind) Name() string { return Name }

// Virtual is false: a cluster runs in real time.
func (Kind) Virtual() bool { return false }

// UsesCluster is true.
func (Kind) UsesCluster() bool { return true }

// For returns a backend for r on the Setup's cluster. No cluster given, or
// kwok's binaries missing where nothing requires them, is
// sim.ErrUnavailable.
func (Kind) For(ctx context.Context, r sim.Run) (sim.Backend, error) {
	var setup sim.Setup
	if r.Setup != nil {
		setup = *r.Setup
	}
	cfg := Config{Kubeconfig: setup.Kubeconfig, NamespacePrefix: r.Name + "-", Controller: r.Controller}
	if setup.Kwok != "" {
		kc, err := kwokCluster(context.WithoutCancel(ctx), setup)
		if err != nil {
			if errors.Is(err, kwok.ErrNoBinaries) && !kwok.Required() {
				return nil, sim.Unavailable(fmt.Errorf("%w. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure", err))
			}
			return nil, fmt.Errorf("kwok: %w", err)
		}
		cfg.Kubeconfig, cfg.ControlPlane, cfg.Kwok = kc.Kubeconfig(), kc, true
	}
	if cfg.Kubeconfig == "" {
		return nil, sim.Unavailable(errors.New("no cluster given: pass a kubeconfig or a kwok cluster (converge run --backend cluster --kubeconfig or --kwok, or -converge.kubeconfig or -converge.kwok)"))
	}
	return New(cfg)
}

// kwokKey holds the Setup's kwok cluster in its Shared.
type kwokKey struct{ dir string }

// process holds the kwok clusters started for Setups without a Shared of
// their own, until StopShared.
var process sim.Shared

// StopShared deletes the kwok clusters started for runs whose Setup had no
// Shared; call it from TestMain after the tests (scenariotest.Main does).
func StopShared() error { return process.Close() }

// kwokCluster is the running kwokctl cluster in setup.Kwok's folder, or,
// for "start", one started on first use and deleted when setup.Shared
// closes (without one, at StopShared).
func kwokCluster(ctx context.Context, setup sim.Setup) (*kwok.Cluster, error) {
	shared := setup.Shared
	if shared == nil {
		shared = &process
	}
	v, err := shared.Get(kwokKey{setup.Kwok}, func() (any, func() error, error) {
		if setup.Kwok != "start" {
			c, err := kwok.Attach(setup.Kwok)
			return c, nil, err
		}
		c, err := kwok.Start(ctx, kwok.Options{})
		if err != nil {
			return nil, nil, err
		}
		return c, c.Stop, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*kwok.Cluster), nil
}
