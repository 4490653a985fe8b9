package backends_test

import (
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/sourcetest"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/backends"
)

const module = "github.com/converge-lab/converge/"

// elsewhere are the string literals equal to a kind's name that do not
// name the kind, each with its file and why.
var elsewhere = map[string]string{
	"sim/kwok/kwok.go\x00cluster": "kwokctl's subcommands (create cluster, delete cluster)",
}

// No code outside a kind's own package and the registry names a backend:
// the engine, the CLI and the tests' driver ask the kind what it can do
// (Virtual, UsesCluster, its Env's capabilities), so a kind added to the
// registry runs, is skipped and is planned without a list elsewhere to
// keep up. A string literal equal to a kind's name in a non-test file
// elsewhere fails this test.
func TestNoBackendNamedOutsideTheRegistry(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	home := map[string]string{} // name -> the kind's package folder
	for _, k := range backends.All() {
		home[k.Name()] = strings.TrimPrefix(reflect.TypeOf(k).PkgPath(), module)
	}
	require.Len(t, home, len(backends.All()), "each kind has a name of its own")
	var found []string
	for _, lit := range sourcetest.StringLiterals(t, root, "sim/backends") {
		pkg, ok := home[lit.Value]
		if !ok || path.Dir(lit.File) == pkg {
			continue
		}
		if _, ok := elsewhere[lit.File+"\x00"+lit.Value]; ok {
			continue
		}
		found = append(found, lit.File+":"+strconv.Itoa(lit.Line)+" names backend "+lit.Value)
	}
	assert.Empty(t, found, "ask the kind (sim.Kind.Virtual, sim.UsesCluster, Env.Can) or the registry (backends.Named) instead")
}

// Every name the registry gives resolves to its kind, and an unknown one
// is an error that lists the names there are.
func TestNamed(t *testing.T) {
	for _, k := range backends.All() {
		got, err := backends.Named(k.Name())
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	_, err := backends.Named("fak")
	require.Error(t, err)
	for _, n := range backends.Names() {
		assert.Contains(t, err.Error(), n)
	}
	assert.Subset(t, backends.Names(), backends.Defaults())
	assert.NotEmpty(t, backends.Defaults())
}

// A virtual kind's backend offers virtual time; a real one's does not
// claim it. Each kind's For either gives a backend named as the kind or
// says why it cannot run here.
func TestKindsSayWhatTheyAre(t *testing.T) {
	for _, k := range backends.All() {
		t.Run(k.Name(), func(t *testing.T) {
			if sim.UsesCluster(k) {
				_, err := k.For(t.Context(), sim.Run{Name: "kinds"})
				require.ErrorIs(t, err, sim.ErrUnavailable, "no cluster given")
				return
			}
			if !k.Virtual() {
				return // starting a control plane is the conformance tests' part
			}
			b, err := k.For(t.Context(), sim.Run{Name: "kinds"})
			require.NoError(t, err)
			assert.Equal(t, k.Name(), b.Name())
			env, err := b.Start(t.Context())
			require.NoError(t, err)
			defer b.Stop()
			assert.True(t, env.Can.Has(sim.VirtualTime))
			assert.NotNil(t, env.InProcess)
		})
	}
}
