// Package backends lists the kinds of backend converge knows, by the names
// scenario files, flags and results use. A new kind is a package of its own
// (a sim.Kind and its sim.Backend) and one line here; nothing else names
// it.
package backends

import (
	"fmt"
	"strings"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
)

// entry is one kind, and whether a scenario that names no backends runs on
// it.
type entry struct {
	kind      sim.Kind
	byDefault bool
}

func registry() []entry {
	return []entry{
		{fake.Kind{}, true},
		{envtest.Kind{}, true},
		{cluster.Kind{}, false},
	}
}

// All is every kind, in the registry's order.
func All() []sim.Kind {
	var out []sim.Kind
	for _, e := range registry() {
		out = append(out, e.kind)
	}
	return out
}

// Names are the kinds' names, in the registry's order.
func Names() []string {
	var out []string
	for _, e := range registry() {
		out = append(out, e.kind.Name())
	}
	return out
}

// Defaults are the names of the kinds a scenario runs on when it names
// none.
func Defaults() []string {
	var out []string
	for _, e := range registry() {
		if e.byDefault {
			out = append(out, e.kind.Name())
		}
	}
	return out
}

// Named is the kind called name, or an error naming those there are.
func Named(name string) (sim.Kind, error) {
	for _, e := range registry() {
		if e.kind.Name() == name {
			return e.kind, nil
		}
	}
	return nil, fmt.Errorf("unknown backend %q (%s)", name, strings.Join(Names(), ", "))
}

// Virtual says whether the kind called name runs in virtual time; false
// for an unknown name.
func Virtual(name string) bool {
	k, err := Named(name)
	return err == nil && k.Virtual()
}

// UsesCluster says whether the kind called name needs a cluster from the
// invocation; false for an unknown name.
func UsesCluster(name string) bool {
	k, err := Named(name)
	return err == nil && sim.UsesCluster(k)
}
