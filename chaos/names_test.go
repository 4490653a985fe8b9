package chaos_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/sourcetest"
)

// No code outside this package names a fault: what the harness does with
// one it asks of the fault (Available, PlaneOf), so a fault added to the
// registry is scheduled, refused and judged without a list elsewhere to
// keep up. A string literal equal to a registered fault's name in a
// non-test file of another package fails this test.
func TestNoFaultNamedOutsideTheRegistry(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var found []string
	for _, lit := range sourcetest.StringLiterals(t, root, "chaos") {
		if slices.Contains(chaos.Names(), lit.Value) {
			found = append(found, lit.File+":"+strconv.Itoa(lit.Line)+" names fault "+lit.Value)
		}
	}
	assert.Empty(t, found, "ask the fault what it needs or does (chaos.Fault.Available, chaos.PlaneOf) instead")
}
