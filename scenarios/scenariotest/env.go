package scenariotest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/converge-lab/converge/sim"
)

// SetenvFrom sets, for t and its subtests, the environment that the
// workload manifests of paths give container (sim.ReadContainerEnv: a
// kubebuilder project's config/manager, read as kustomize builds it, and
// its "manager" container), so that an operator that reads settings from
// its Deployment's env (the image of what it deploys, a switch) runs in
// the test as in its cluster:
//
//	scenariotest.SetenvFrom(t, "manager", "../../config/manager")
//
// A variable the process already has keeps its value, so that the shell
// can try another; one the manifests cannot give (a value from the pod's
// fields, or from a ConfigMap that is not among them) is left as it is.
// The test log says which. A manifest it cannot read fails t. As
// t.Setenv, it is called from a test that is not parallel, before Run.
func SetenvFrom(t testing.TB, container string, paths ...string) {
	t.Helper()
	env, err := sim.ReadContainerEnv(container, paths...)
	if err != nil {
		t.Fatal(err)
	}
	var set, kept []string
	for _, e := range env.Env {
		if _, ok := os.LookupEnv(e.Name); ok {
			kept = append(kept, e.Name)
			continue
		}
		t.Setenv(e.Name, e.Value)
		set = append(set, e.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "environment of %s (%s):", env.Workload, strings.Join(paths, ", "))
	if len(set) > 0 {
		fmt.Fprintf(&b, " set %s;", strings.Join(set, ", "))
	}
	if len(kept) > 0 {
		fmt.Fprintf(&b, " kept as the process has them: %s;", strings.Join(kept, ", "))
	}
	if len(env.Unresolved) > 0 {
		var un []string
		for _, u := range env.Unresolved {
			un = append(un, u.String())
		}
		fmt.Fprintf(&b, " not set, the manifests give no value: %s;", strings.Join(un, "; "))
	}
	if len(set)+len(kept)+len(env.Unresolved) == 0 {
		b.WriteString(" none;")
	}
	t.Log(strings.TrimSuffix(b.String(), ";"))
}
