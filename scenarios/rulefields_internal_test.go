package scenarios

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every scenario of the repository loads with its rules checked against
// their kinds' schemas: none is refused for a field its kind can hold.
func TestRepositoryRulesAreTypedAndAccepted(t *testing.T) {
	typed := 0
	for _, dir := range []string{
		"scaler/catalogue", "scaler/testdata", "faults", "scenariotest/testdata/scratch/scenarios",
		"../examples/webapp/scenarios", "../examples/mirror/scenarios",
	} {
		all, err := LoadDir(filepath.FromSlash(dir))
		require.NoError(t, err, dir)
		for _, s := range all {
			schemas := s.kindSchemas()
			for _, inv := range s.Invariants {
				types := schemas.types(inv.Select, inv.Rule)
				assert.NotNil(t, types.Object, "%s: invariant %s: %s %s has a schema", s.Name, inv.Name, inv.Select.APIVersion, inv.Select.Kind)
				typed++
			}
			for _, e := range s.Goal.Objects {
				if e.Condition != "" {
					assert.NotNil(t, schemas.types(e.Select, e.Condition).Object, "%s: goal on %s", s.Name, e.Select.Kind)
					typed++
				}
			}
		}
	}
	// The examples' rules on their own CRDs and across kinds are among them.
	assert.GreaterOrEqual(t, typed, 20)
}
