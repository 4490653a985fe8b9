package scaler_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
)

// The scenarios make bench runs outside the catalogue load, and the
// scaler takes their settings.
func TestBenchScenariosLoad(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		s, err := scenarios.Load(f)
		require.NoError(t, err, f)
		assert.True(t, s.RunsOn(fake.Name) || s.RunsOn(envtest.Name), f)
		_, err = scaler.Workers(s.Controller.Settings)
		assert.NoError(t, err, f)
	}
	for _, bad := range []string{"0", "x", "1001", "-2"} {
		_, err := scaler.Workers(map[string]string{"workers": bad})
		assert.ErrorContains(t, err, "setting workers", bad)
	}
	n, err := scaler.Workers(map[string]string{"workers": "5"})
	require.NoError(t, err)
	assert.Equal(t, 5, n)
}
