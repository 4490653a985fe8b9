package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/semver"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-lab/converge/internal/crversion"
)

// A Manager's controllers run without the priority queue with a
// controller-runtime whose queue deadlocks when a controller stops, with
// it from v0.25.0 on, and as the options say when they say.
func TestThePriorityQueueWhereItCanStop(t *testing.T) {
	v := crversion.Version()
	require.True(t, semver.IsValid(v), "the build names controller-runtime's version: %q", v)
	usesQueue := func(options func(*manager.Options)) *bool {
		var got *bool
		m := Manager{
			Setup: func(mgr manager.Manager, _ Instance) error {
				got = mgr.GetControllerOptions().UsePriorityQueue
				return nil
			},
			Options: options,
		}
		_, err := m.New(Instance{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Namespace: "run", Identity: "0"})
		require.NoError(t, err)
		return got
	}
	if semver.Compare(v, "v0.25.0") < 0 {
		assert.Equal(t, ptr.To(false), usesQueue(nil), "controller-runtime %s", v)
	} else {
		assert.Nil(t, usesQueue(nil), "controller-runtime %s: its own default", v)
	}
	assert.Equal(t, ptr.To(true), usesQueue(func(o *manager.Options) { o.Controller.UsePriorityQueue = ptr.To(true) }))
}
