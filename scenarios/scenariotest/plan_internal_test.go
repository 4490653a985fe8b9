package scenariotest

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
)

func parse(t *testing.T, yaml string) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return s
}

// userSuite is three scenarios of a controller of ConfigMaps: two without
// faults, one with a conflict.
func userSuite(t *testing.T) []*scenarios.Scenario {
	t.Helper()
	const goal = `
catches: a ConfigMap that is not there
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, name: a}
      count: 1
timing: {deadline: 1m, settle: 5s}
`
	return []*scenarios.Scenario{
		parse(t, "name: one\n"+goal),
		parse(t, "name: two\n"+goal),
		parse(t, "name: conflicted\nfaults:\n  - {fault: conflict, target: {verbs: [update]}, when: {probability: 0.5, until: 15s}}\n"+goal),
	}
}

func names(list []*scenarios.Scenario, backend string) []string {
	var out []string
	for _, s := range list {
		if s.RunsOn(backend) {
			out = append(out, s.Name)
		}
	}
	return out
}

func TestPlanRunsTheFaultProfilesInRealTimeOnlyWhereAsked(t *testing.T) {
	profiles, err := scenarios.FaultProfiles()
	require.NoError(t, err)
	suite := userSuite(t)
	everywhere := 0 // profiles that run on fake and envtest
	for _, p := range profiles {
		if p.RunsOn(fake.Name) {
			everywhere++
		}
	}

	list, _, deferred, err := plan(suite, Options{Faults: true}, invocation.Default())
	require.NoError(t, err)
	assert.Len(t, names(list, fake.Name), 3+2*everywhere, "each fault-free scenario under every profile that runs on fake")
	assert.Equal(t, []string{"one", "two", "conflicted"}, names(list, envtest.Name), "no profile on envtest unless named")
	assert.Equal(t, 2*len(profiles), deferred, "what -converge.full would add: every profile of both on envtest")

	list, _, deferred, err = plan(suite, Options{Faults: true, FaultScenarios: []string{"two"}}, invocation.Default())
	require.NoError(t, err)
	onEnvtest := names(list, envtest.Name)
	assert.Len(t, onEnvtest, 3+len(profiles))
	assert.Contains(t, onEnvtest, "two-conflicts")
	assert.NotContains(t, onEnvtest, "one-conflicts")
	assert.Contains(t, names(list, fake.Name), "one-conflicts")
	assert.Equal(t, len(profiles), deferred)

	list, _, deferred, err = plan(suite, Options{Faults: true, Full: true}, invocation.Default())
	require.NoError(t, err)
	assert.Len(t, names(list, envtest.Name), 3+2*len(profiles))
	assert.Zero(t, deferred)

	_, _, _, err = plan(suite, Options{Faults: true, FaultScenarios: []string{"tow"}}, invocation.Default())
	assert.ErrorContains(t, err, `FaultScenarios names "tow", which is not one of its scenarios`)
}

func TestPlanKeepsEnvtestToTheScenariosNamed(t *testing.T) {
	suite := userSuite(t)
	list, _, deferred, err := plan(suite, Options{EnvtestScenarios: []string{"conflicted"}}, invocation.Default())
	require.NoError(t, err)
	assert.Equal(t, []string{"conflicted"}, names(list, envtest.Name))
	assert.Equal(t, []string{"one", "two", "conflicted"}, names(list, fake.Name))
	assert.Equal(t, 2, deferred)
	assert.Len(t, suite[0].RunsOnBackends(), 2, "the scenarios given are left as they were")

	list, _, _, err = plan(suite, Options{EnvtestScenarios: []string{"conflicted"}, Full: true}, invocation.Default())
	require.NoError(t, err)
	assert.Len(t, names(list, envtest.Name), 3)

	_, _, _, err = plan(suite, Options{EnvtestScenarios: []string{"nope"}}, invocation.Default())
	assert.ErrorContains(t, err, `EnvtestScenarios names "nope"`)
}

func TestEstimateSaysWhenTheTimeoutCannotHoldTheRuns(t *testing.T) {
	suite := userSuite(t) // settle 5 s; conflicted's faults end at 15 s
	all := func(*scenarios.Scenario) bool { return true }
	none := func(*scenarios.Scenario) bool { return false }
	backends := []string{fake.Name, envtest.Name}

	e := estimate(suite, backends, 1, none, 2)
	assert.Equal(t, 3, e.fake)
	assert.Equal(t, 3, e.real)
	assert.Equal(t, 5*time.Second+5*time.Second+15*time.Second+3*startup, e.least, "one after another: the sum")

	side := estimate(suite, backends, 2, all, 2)
	assert.Equal(t, 6, side.real)
	assert.Equal(t, e.least, side.least, "two seeds each, two at a time")

	assert.NoError(t, e.fits(time.Hour))
	err := e.fits(10 * time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3 in real time, which take at least 31s")
	assert.Contains(t, err.Error(), "-test.timeout leaves 10s")
	assert.Contains(t, err.Error(), "-timeout=2m0s")

	fakeOnly := estimate(suite, []string{fake.Name}, 1, none, 2)
	assert.NoError(t, fakeOnly.fits(0), "virtual time needs no wall-clock budget")
}

// A scenario on fake alone under a profile that needs a real API server is
// a run that cannot be: a SKIP with its reason, not the whole test's
// failure.
func TestPlanSkipsAProfileWithNoBackendInCommon(t *testing.T) {
	profiles, err := scenarios.FaultProfiles()
	require.NoError(t, err)
	var realOnly []string
	for _, p := range profiles {
		if !p.RunsOn(fake.Name) {
			realOnly = append(realOnly, p.Name)
		}
	}
	require.NotEmpty(t, realOnly, "a profile that runs in real time only")
	only := *userSuite(t)[0]
	only.Name, only.Backends = "only", []string{fake.Name}
	list, skips, _, err := plan([]*scenarios.Scenario{&only}, Options{Faults: true, Full: true}, invocation.Default())
	require.NoError(t, err)
	var skippedNames []string
	for _, sk := range skips {
		skippedNames = append(skippedNames, sk.name)
		assert.ErrorIs(t, sk.why, scenarios.ErrNoCommonBackend)
	}
	for _, p := range realOnly {
		assert.Contains(t, skippedNames, "only-"+p)
	}
	assert.Len(t, list, 1+len(profiles)-len(realOnly))
}

// A profile a controller has no use for is left out, each run a SKIP with
// the reason given; a name that is no profile is an error, not a skip of
// nothing.
func TestPlanSkipsTheProfilesNamed(t *testing.T) {
	suite := userSuite(t)
	list, skips, _, err := plan(suite, Options{Faults: true, SkipProfiles: map[string]string{"conflicts": "it never updates"}}, invocation.Default())
	require.NoError(t, err)
	assert.NotContains(t, names(list, fake.Name), "one-conflicts")
	require.NotEmpty(t, skips)
	var named []string
	for _, sk := range skips {
		named = append(named, sk.name)
		assert.EqualError(t, sk.why, "it never updates")
	}
	assert.Equal(t, []string{"one-conflicts", "two-conflicts"}, named)

	_, _, _, err = plan(suite, Options{Faults: true, SkipProfiles: map[string]string{"conflict": "typo"}}, invocation.Default())
	assert.ErrorContains(t, err, `SkipProfiles names "conflict", which is no fault profile`)

	// A scenario can say it too, for itself alone.
	suite = userSuite(t)
	suite[0].SkipProfiles = map[string]string{"leader-failover": "one replica only"}
	list, skips, _, err = plan(suite, Options{Faults: true}, invocation.Default())
	require.NoError(t, err)
	assert.NotContains(t, names(list, fake.Name), suite[0].Name+"-leader-failover")
	assert.Contains(t, names(list, fake.Name), suite[1].Name+"-leader-failover")
	require.Len(t, skips, 1)
	assert.Equal(t, suite[0].Name+"-leader-failover", skips[0].name)
	assert.EqualError(t, skips[0].why, "the scenario skips leader-failover: one replica only")
	suite[0].SkipProfiles = map[string]string{"leader-failovers": "typo"}
	_, _, _, err = plan(suite, Options{Faults: true}, invocation.Default())
	assert.ErrorContains(t, err, `scenario `+suite[0].Name+`: skipProfiles names "leader-failovers", which is no fault profile`)
}

// The estimate counts only the runs -test.run selects: a replay of one
// scenario is not refused for the cost of the whole list.
func TestRunPatternSelects(t *testing.T) {
	assert.Equal(t, []string{"^TestScenarios$", "^web-(a|b/c)$", `fa\/ke`, "[/]"}, splitRunPattern(`^TestScenarios$/^web-(a|b/c)$/fa\/ke/[/]`))
	f := flag.Lookup("test.run")
	require.NotNil(t, f)
	old := f.Value.String()
	t.Cleanup(func() { require.NoError(t, flag.Set("test.run", old)) })
	require.NoError(t, flag.Set("test.run", "^"+t.Name()+"$/^baseline$/envtest"))
	assert.True(t, runSelects(t, "baseline"))
	assert.False(t, runSelects(t, "tombstone"))
	assert.True(t, runSelects(t, "baseline", "envtest"))
	assert.False(t, runSelects(t, "baseline", "fake"))
	require.NoError(t, flag.Set("test.run", ""))
	assert.True(t, runSelects(t, "tombstone", "fake"))
}
