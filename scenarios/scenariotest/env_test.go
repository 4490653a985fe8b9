package scenariotest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// TestSetenvFrom: the manager container's variables are set for the test
// that asks and its subtests, and unset after it; one the process already
// has keeps its value.
func TestSetenvFrom(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manager.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
spec:
  template:
    spec:
      containers:
      - name: manager
        env:
        - name: CONVERGE_TEST_IMAGE
          value: memcached:1.6
        - name: CONVERGE_TEST_KEPT
          value: from-the-manifest
        - name: CONVERGE_TEST_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
`), 0o644))
	t.Setenv("CONVERGE_TEST_KEPT", "from-the-shell")
	t.Run("asks", func(t *testing.T) {
		scenariotest.SetenvFrom(t, "manager", dir)
		t.Run("a run", func(t *testing.T) {
			assert.Equal(t, "memcached:1.6", os.Getenv("CONVERGE_TEST_IMAGE"))
		})
		assert.Equal(t, "from-the-shell", os.Getenv("CONVERGE_TEST_KEPT"))
		_, ok := os.LookupEnv("CONVERGE_TEST_NAMESPACE")
		assert.False(t, ok, "the manifest gives it no value")
	})
	_, ok := os.LookupEnv("CONVERGE_TEST_IMAGE")
	assert.False(t, ok, "unset once the test that asked ends")
	assert.Equal(t, "from-the-shell", os.Getenv("CONVERGE_TEST_KEPT"))
}
