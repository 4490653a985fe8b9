package fake

import (
	"context"

	"github.com/converge-lab/converge/sim"
)

// Kind is the fake backend as a kind: each run gets an in-memory API of its
// own, in namespace "converge", in virtual time.
type Kind struct{}

var (
	_ sim.Kind      = Kind{}
	_ sim.InProcess = (*Backend)(nil)
)

// Name is "fake".
func (Kind) Name() string { return Name }

// Virtual is true: a run's API lives in its bubble.
func (Kind) Virtual() bool { return true }

// For returns a new in-memory API acting on r's controller's identity.
func (Kind) For(_ context.Context, r sim.Run) (sim.Backend, error) {
	return New(Config{Namespace: "converge", Controller: r.Controller})
}
