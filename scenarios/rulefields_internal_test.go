package scenarios

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every scenario of the repository loads with its rules checked against
// their kinds' schemas: none is refused for a field its kind can hold.
func TestRepositoryRulesAreTypedAndAccepted(t *testing.T) {
	typed, manifests := 0, 0
	for _, dir := range []string{
		"scaler/catalogue", "scaler/testdata", "faults", "scenariotest/testdata/scratch/scenarios",
		"../examples/webapp/scenarios", "../examples/mirror/scenarios",
	} {
		all, err := LoadDir(filepath.FromSlash(dir))
		require.NoError(t, err, dir)
		for _, s := range all {
			schemas := s.kindSchemas()
			// The objects it creates hold only what their schemas say.
			for _, o := range s.Objects {
				m := o.Manifest
				sel := Selector{APIVersion: fmt.Sprint(m["apiVersion"]), Kind: fmt.Sprint(m["kind"])}
				if sch := schemas.of(sel); sch != nil {
					assert.Empty(t, sch.CheckValue(nil, map[string]any(m)), "%s: an object of kind %s", s.Name, sel.Kind)
					manifests++
				}
			}
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
	assert.GreaterOrEqual(t, manifests, 20)
}
