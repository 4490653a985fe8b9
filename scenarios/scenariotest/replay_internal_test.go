package scenariotest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-lab/converge/internal/invocation"
)

// A replay command names the tests as converge said to (a package for go
// test, or a compiled binary run directly, from where its user stands),
// and as go test of this package from its module's root otherwise.
func TestReplayNamesTheTestsAsConvergeSays(t *testing.T) {
	run := invocation.Default()
	run.Seed, run.Backends = 3, []string{"fake"}
	for _, tc := range []struct {
		from invocation.Invocation
		want string
	}{
		{invocation.Invocation{ReplayBinary: "./bin/converge-scenarios.test"}, "./bin/converge-scenarios.test -test.count=1 -test.run '^T$/^s$'"},
		{invocation.Invocation{ReplayBinary: "/a b/x.test"}, "'/a b/x.test' -test.count=1 -test.run '^T$/^s$'"},
		{invocation.Invocation{ReplayPackage: "../../examples/mirror"}, "go test ../../examples/mirror -count=1 -run '^T$/^s$'"},
		{invocation.Invocation{}, "go test " + packageFromRoot() + " -count=1 -run '^T$/^s$'"},
	} {
		assert.Equal(t, run.Command(registered() != nil, tc.want), goTest(tc.from, run, "^T$/^s$"), tc.from)
	}
}
