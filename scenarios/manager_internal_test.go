package scenarios

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// A probe gathers neither registry's process or Go runtime metrics, which
// each probe read before, and still reads the rest.
func TestProbesGatherNoProcessMetrics(t *testing.T) {
	dropProcessCollectors()
	crFamilies, err := metrics.Registry.Gather()
	require.NoError(t, err)
	legacy, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range append(crFamilies, legacy...) {
		require.False(t, strings.HasPrefix(f.GetName(), "process_") || strings.HasPrefix(f.GetName(), "go_"),
			"%s is still gathered", f.GetName())
	}
	require.NotEmpty(t, crFamilies, "controller-runtime's registry gathers nothing")
}
