package scenarios_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

const head = "name: a\ncatches: x\n"

// Files that used to pass validation and then never end or exhaust memory
// are refused at load time, naming the bound.
func TestBoundsMakeEveryScenarioFinish(t *testing.T) {
	for doc, want := range map[string]string{
		head + "world: {interference: [{every: 1ns, select: {apiVersion: v1, kind: Pod}, delete: true}]}\n":                                                                                                                  "s.yaml:3: world.interference[0].every: at least 10ms, got 1ns",
		head + "world: {interference: [{every: 1s, select: {apiVersion: v1, kind: Pod}}]}\n":                                                                                                                                 "s.yaml:3: world.interference[0]: say what the actor does",
		head + "objects: [{count: 100000000, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"c-{{index}}\"}}}]\n":                                                                                             "s.yaml:3: objects[0].count: must be within 0..20000, got 100000000",
		head + "objects: [{count: 15000, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"c-{{index}}\"}}}, {count: 15000, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"c-{{index}}\"}}}]\n": "s.yaml:3: objects: 30000 objects, at most 20000",
		head + "objects: [{manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"<img>\"}}}]\n":                                                                                                                     `s.yaml:3: objects[0].manifest: metadata.name "<img>"`,
		head + "objects: [{file: /etc/passwd}]\n":                                                                             "s.yaml:3: objects[0].file: \"/etc/passwd\": a path relative to the scenario's folder",
		head + "objects: [{file: nowhere.yaml}]\n":                                                                            "nowhere.yaml: no such file",
		head + "world: {nodes: 5000}\n":                                                                                       "s.yaml:3: world.nodes: must be within 0..1000, got 5000",
		head + "timing: {deadline: 2000000h}\n":                                                                               "s.yaml:3: timing.deadline: at most 24h0m0s",
		head + "world: {readiness: {kind: flapping, period: 1ns}}\n":                                                          "s.yaml:3: world.readiness.period: at least 10ms",
		head + "faults:\n  - {fault: compaction, when: {every: 1ns}}\n":                                                       "s.yaml:4: faults[0].when.every: at least 10ms",
		head + "faults:\n  - {fault: conflict, target: {name: " + strings.Repeat("n", 254) + "}}\n":                           "s.yaml:4: faults[0].target: a resource or namespace of at most 63",
		head + "controller: {instances: 11}\n":                                                                                "controller.instances: must be within 0..10",
		head + "controller: {leaseDuration: 1ns}\n":                                                                           "controller.leaseDuration: at least 1s",
		head + "goal: {objects: [{select: {apiVersion: v1, kind: Pod, labels: \"a b c\"}, count: 1}]}\n":                      "s.yaml:3: goal.objects[0].select: labels:",
		head + "goal: {objects: [{select: {apiVersion: v1, kind: Pod}}]}\n":                                                   "s.yaml:3: goal.objects[0]: say what must hold",
		head + "invariants: [{name: x, select: {apiVersion: v1, kind: Pod}, rule: \"" + strings.Repeat("a", 20000) + "\"}]\n": "invariants[0].rule:",
		head + "world: {readiness: {kind: fraction-never, fraction: .nan}}\n":                                                 `world.readiness.fraction: expected a finite number, got ".nan"`,
		head + "budgets: {requests: {frobnicate: 1}}\n":                                                                       `budgets.requests.frobnicate: unknown verb "frobnicate"`,
		"name: " + strings.Repeat("a", 60) + "\ncatches: x\n":                                                                 "s.yaml:1: name: at most 57 characters",
	} {
		_, err := scenarios.Parse("s.yaml", []byte(doc))
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), want, doc)
	}
}

// What YAML says is what the scenario is: a second document is an error,
// a bare number is no duration, and a string is the string written.
func TestParseTakesYAMLAtItsWord(t *testing.T) {
	_, err := scenarios.Parse("s.yaml", []byte(head+"---\nname: b\ncatches: y\n"))
	assert.ErrorContains(t, err, "s.yaml:3: a scenario file holds one scenario; this is a second YAML document")

	_, err = scenarios.Parse("s.yaml", []byte(head+"faults:\n  - {fault: latency, delay: 2}\n"))
	assert.ErrorContains(t, err, `s.yaml:4: faults[0].delay: 2 has no unit: write a duration like "2s"`)
	_, err = scenarios.Parse("s.yaml", []byte(head+"timing: {deadline: 300}\n"))
	assert.ErrorContains(t, err, "s.yaml:3: timing.deadline: 300 has no unit")

	s, err := scenarios.Parse("s.yaml", []byte("name: no\ncatches: yes\ncontroller: {settings: {team: on}}\n"))
	require.NoError(t, err)
	assert.Equal(t, "no", s.Name)
	assert.Equal(t, "yes", s.Catches)
	assert.Equal(t, "on", s.Controller.Settings["team"])

	_, err = scenarios.Parse("s.yaml", []byte("name: [no]\ncatches: x\n"))
	assert.ErrorContains(t, err, "s.yaml:1: name: expected a string")
}

// A few kilobytes of aliases fanned out through faults[*].target.verbs (a
// thousand faults of a thousand wrong verbs each: a million mistakes) is
// refused fast, with a bounded number of error lines.
func TestAliasFanOutIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(head + "description: &m {a: b}\nfaults:\n  - &f {fault: conflict, target: {verbs: [" + strings.TrimSuffix(strings.Repeat("*m, ", 1000), ", ") + "]}}\n")
	b.WriteString("  - " + strings.TrimSuffix(strings.Repeat("*f\n  - ", 1000), "\n  - ") + "\n")
	require.Less(t, b.Len(), 12<<10)
	began := time.Now()
	_, err := scenarios.Parse("s.yaml", []byte(b.String()))
	took := time.Since(began)
	require.Error(t, err)
	lines := strings.Count(err.Error(), "\n") + 1
	assert.LessOrEqual(t, lines, 51, "at most 50 mistakes and a count of the rest")
	t.Logf("refused in %v with %d lines", took, lines)

	big := strings.Repeat("#", scenarios.MaxFileSize+1)
	_, err = scenarios.Parse("s.yaml", []byte(big))
	assert.ErrorContains(t, err, "larger than 1024 KiB")
	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, []byte(big), 0o644))
	_, err = scenarios.Load(path)
	assert.ErrorContains(t, err, "larger than 1024 KiB")
}

// A result holds its scenario: parsed back, it is the scenario that ran.
func TestResultHoldsItsScenario(t *testing.T) {
	all, err := scaler.Catalogue()
	require.NoError(t, err)
	for _, s := range all {
		res := scenarios.Run(context.Background(), s, scenarios.Options{})
		require.NotEmpty(t, res.Spec, s.Name)
		again, err := scenarios.Parse(s.Name+".json", res.Spec)
		require.NoError(t, err, "%s: %s", s.Name, res.Spec)
		assert.Equal(t, s, again, s.Name)
	}
}

// A run that passes its caller's limit ends as an error naming the limit,
// however long its deadline.
func TestLimitEndsARun(t *testing.T) {
	s, err := scenarios.Parse("s.yaml", []byte(head+"objects: [{count: 2, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"c-{{index}}\"}}}]\n"+
		"world: {interference: [{every: 10ms, select: {apiVersion: v1, kind: ConfigMap}, set: {path: data.n, value: \"{{n}}\"}}]}\ntiming: {deadline: 24h, settle: 23h}\n"))
	require.NoError(t, err)
	var calls atomic.Int64
	limit := func() error {
		if calls.Add(1) > 2000 {
			return fmt.Errorf("the run passed its wall-clock limit of 1s")
		}
		return nil
	}
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Limit: limit, Controller: scaler.Controller{}})
		assert.False(t, res.Pass)
		assert.Equal(t, "the run passed its wall-clock limit of 1s", res.Error)
		assert.Less(t, time.Duration(res.Simulated), time.Hour)
	})
}

// WallClockLimit counts real time, from outside a bubble.
func TestWallClockLimit(t *testing.T) {
	limit, stop := scenarios.WallClockLimit(20 * time.Millisecond)
	defer stop()
	require.NoError(t, limit())
	require.Eventually(t, func() bool { return limit() != nil }, 10*time.Second, 5*time.Millisecond)
	assert.ErrorContains(t, limit(), "wall-clock limit of 20ms (converge run --run-timeout)")
}

func FuzzParse(f *testing.F) {
	all, err := scaler.Catalogue()
	require.NoError(f, err)
	for _, s := range all {
		data, err := os.ReadFile(filepath.Join("scaler", "catalogue", s.Name+".yaml"))
		if err == nil {
			f.Add(data)
		}
	}
	for _, doc := range []string{
		head + "world: {interference: [{every: 1ns, select: {apiVersion: v1, kind: Pod}, delete: true}]}\n",
		head + "---\nname: b\n",
		"a: &a [*a]\n",
		head + "faults:\n  - {fault: latency, delay: 2}\n",
		"name: no\ncatches: yes\n",
		head + "world: {readiness: {kind: fraction-never, fraction: .nan}}\n",
		head + "invariants: [{name: x, select: {apiVersion: v1, kind: Pod}, rule: 'object.spec.x > oldObject.spec.x'}]\n",
		"{\"name\": \"j\", \"catches\": \"x\", \"objects\": [{\"count\": 3, \"manifest\": {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c-{{index}}\"}}}]}",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenarios.Parse("f.yaml", data)
		if err != nil {
			require.NotEmpty(t, err.Error())
			require.LessOrEqual(t, strings.Count(err.Error(), "\n"), 60)
			return
		}
		require.NoError(t, s.Validate())
		// What parses runs within the bounds.
		assert.LessOrEqual(t, s.ObjectCount(), scenarios.MaxObjects)
		assert.LessOrEqual(t, time.Duration(s.Timing.Deadline), scenarios.MaxDeadline)
	})
}
