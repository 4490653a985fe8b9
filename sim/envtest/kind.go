package envtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/converge-lab/converge/sim"
)

// Kind is the envtest backend as a kind: each run gets a namespace of its
// own on a control plane that runs share.
type Kind struct {
	// ControlPlane runs every run. Nil means one per set of Options,
	// started on first use: held by the Setup's Shared, or, without one,
	// the process's (SharedWith).
	ControlPlane *ControlPlane
}

var _ sim.Kind = Kind{}

// Name is "envtest".
func (Kind) Name() string { return Name }

// Virtual is false: a real API server runs in real time.
func (Kind) Virtual() bool { return false }

// For returns a backend for r on k's control plane, or on one without a
// watch cache when r needs it. Missing binaries, where nothing requires
// them (Required), are sim.ErrUnavailable.
func (k Kind) For(ctx context.Context, r sim.Run) (sim.Backend, error) {
	cp := k.ControlPlane
	if cp == nil {
		var err error
		if cp, err = plane(context.WithoutCancel(ctx), r); err != nil {
			if errors.Is(err, ErrNoAssets) && !Required() {
				return nil, sim.Unavailable(fmt.Errorf("%w. Set CI=true or CONVERGE_REQUIRE_ENVTEST=1 to make this a failure", err))
			}
			return nil, err
		}
	}
	return NewBackendWith(cp, BackendConfig{Prefix: r.Name + "-", Controller: r.Controller})
}

// plane is the control plane for r's options: the Setup's shared one, or
// the process's.
func plane(ctx context.Context, r sim.Run) (*ControlPlane, error) {
	opts := Options{NoWatchCache: r.NoWatchCache}
	if r.Setup == nil || r.Setup.Shared == nil {
		return SharedWith(ctx, opts)
	}
	v, err := r.Setup.Shared.Get(opts, func() (any, func() error, error) {
		cp, err := StartControlPlaneWith(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		return cp, cp.Stop, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*ControlPlane), nil
}
