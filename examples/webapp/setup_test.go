package webapp_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/internal/crversion"
	"github.com/converge-lab/converge/sim/fake"
)

func TestBugs(t *testing.T) {
	seen := map[webapp.Bug]bool{}
	for _, b := range webapp.Bugs() {
		assert.False(t, seen[b.Name], "%s listed twice", b.Name)
		seen[b.Name] = true
		assert.NotEmpty(t, b.Description, b.Name)
		assert.NoError(t, webapp.Options{Bug: b.Name}.Validate())
	}
	assert.NoError(t, webapp.Options{}.Validate(), "no bug: the correct operator")
	assert.ErrorContains(t, webapp.Options{Bug: "off-by-one"}.Validate(), `unknown bug "off-by-one"`)
}

// TestSetupRefuses what would fail later: an unknown bug, and a manager
// whose scheme does not know WebApps.
func TestSetupRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Stop()) }()
		newManager := func(scheme *runtime.Scheme) ctrl.Manager {
			mgr, err := ctrl.NewManager(env.RESTConfig, ctrl.Options{
				Scheme:                 scheme,
				Metrics:                metricsserver.Options{BindAddress: "0"},
				HealthProbeBindAddress: "0",
				// controller-runtime before v0.25 can deadlock stopping a
				// controller on its priority queue.
				Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(crversion.PriorityQueueStops())},
			})
			require.NoError(t, err)
			return mgr
		}

		scheme, err := webapp.NewScheme()
		require.NoError(t, err)
		assert.ErrorContains(t, webapp.Setup(newManager(scheme), webapp.Options{Bug: "off-by-one"}), "unknown bug")
		assert.ErrorContains(t, webapp.Setup(newManager(runtime.NewScheme()), webapp.Options{}), "NewScheme")
		assert.NoError(t, webapp.Setup(newManager(scheme), webapp.Options{}))
	})
}
