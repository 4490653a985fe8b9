// Package scenariotest runs scenario files against a controller from a
// go test of its own repository:
//
//	func TestScenarios(t *testing.T) {
//		scenariotest.Run(t, "testdata/scenarios", scenarios.Manager{
//			ControllerName: "webapp",
//			Setup: func(mgr manager.Manager, _ scenarios.Instance) error { ... },
//		})
//	}
//
// Each scenario runs on every backend it names (fake and envtest unless it
// says otherwise) as a subtest scenario/backend/seed-N, so go test's -run
// picks one run: on fake inside a testing/synctest bubble, in virtual time;
// on envtest against a real kube-apiserver, etcd and
// kube-controller-manager, started for the test and stopped after it,
// when its binaries are found ($KUBEBUILDER_ASSETS, or `make assets` of
// converge), and skipped loudly when not (a failure where CI=true or
// CONVERGE_REQUIRE_ENVTEST=1). Runs go side by side (see Options). A
// failing run prints why, where its result is, and the command that
// replays it.
//
// A plain go test is sized for go test's default 10-minute timeout: the
// fault profiles (Options.Faults) run on fake, and in real time only for
// the scenarios Options.FaultScenarios names; -converge.full (or
// Options.Full) runs the whole matrix. At the start, Run logs how many runs
// it plans in real time and the least time they take, and fails at once,
// saying what to change, when the time -test.timeout leaves cannot hold
// them.
//
// A fault profile's run on fake is also judged by when it converged,
// against fault-free references of its world (Liveness): converged late
// and idle longer than they were, it fails with a liveness finding, even
// within its goal's deadline.
//
// What a go test is asked to do (package internal/invocation) comes from
// the -converge.* flags, which the package's TestMain registers by calling
// Main (or RegisterFlags), and from $CONVERGE_FLAGS, which holds the same
// flags and works in any test binary: -converge.seeds, -converge.seed,
// -converge.backends, -converge.full, -converge.report (a folder for every
// result and the HTML report), -converge.run-timeout, -converge.file (run
// this scenario file instead of the test's own scenarios; repeat it),
// -converge.kubeconfig (a cluster for the cluster backend), -converge.kwok
// (a kwokctl cluster's folder, sim/kwok, or "start" for one of the test's
// own: the cluster backend runs there, its kubeconfig taken from it, and
// may restart its API server and compact its etcd), -converge.list (list
// the scenarios, run nothing), -converge.explore=NAME (explore that
// fault-free scenario instead; see Explore) and -converge.shrink=RESULT.json
// (shrink that failing run; see Shrink). The converge CLI drives a compiled
// test binary through $CONVERGE_FLAGS:
//
//	converge run --package ./webapp --seeds 1-20 --report out/
package scenariotest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
)

// ListPrefix starts each line -converge.list prints; a Listed, as JSON,
// follows it.
const ListPrefix = "converge-scenario: "

// Listed is one scenario as -converge.list prints it.
type Listed struct {
	// Test is the test that runs it (its subtests are
	// Test/name/backend/seed-N).
	Test     string   `json:"test"`
	Name     string   `json:"name"`
	Backends []string `json:"backends"`
	Faults   []string `json:"faults,omitempty"`
	Catches  string   `json:"catches,omitempty"`
}

// Options adjust Run. The zero value runs every scenario as written, on
// every backend it names, side by side.
//
// Runs go side by side (t.Parallel, so at most go test's -parallel at once,
// GOMAXPROCS by default): each has its own namespace, and on envtest the
// time of the suite is that of its slowest runs rather than their sum. A run
// that restarts the API server or holds a hundred objects or more runs
// alone, before the others; a controller that is scenarios.OneAtATime (a
// controller-runtime manager) runs its scenarios one after another; on a
// kwokctl cluster runs go one at a time.
type Options struct {
	// Serial runs the scenarios one after another.
	Serial bool
	// Parallel is the default now; it is kept so that code which set it
	// still builds.
	//
	// Deprecated: runs are side by side unless Serial.
	Parallel bool
	// Faults also runs every scenario without faults of its own under each
	// of the fault profiles (scenarios.FaultProfiles), as
	// <scenario>-<profile>: on fake, and on envtest (a run in real time
	// each) only for the scenarios FaultScenarios names, or all of them
	// with Full or -converge.full.
	Faults bool
	// FaultScenarios names the scenarios whose fault-profile runs also go
	// on envtest (a representative one, say: every profile on envtest is
	// ten runs in real time per scenario).
	FaultScenarios []string
	// FaultBackends, when set, are the only backends the fault-profile
	// runs use.
	FaultBackends []string
	// EnvtestScenarios, when set, names the only scenarios that run on
	// envtest (or a cluster) unless Full; the others run on fake alone.
	EnvtestScenarios []string
	// Full runs the whole matrix, as -converge.full does: every scenario
	// and every fault-profile run on every backend it names.
	Full bool
	// SkipProfiles leaves fault profiles out of Faults, by name, each with
	// the reason its runs report as a SKIP (a controller that runs one
	// replica only has no use for leader-failover). A name that is no
	// profile fails the test.
	SkipProfiles map[string]string
	// SharedControlPlane runs on the test binary's shared envtest control
	// plane (envtest.Shared; stop it from TestMain with simtest.Main)
	// rather than on one started for this call and stopped after it: for
	// a binary whose other tests use that plane too.
	SharedControlPlane bool
	// Others are the Go values of the other controllers the scenarios run
	// beside the one under test (Scenario.Others), by name
	// (scenarios.Options.Others).
	Others map[string]scenarios.Controller
}

func (o Options) full(inv invocation.Invocation) bool { return o.Full || inv.Full }

// current is this test binary's invocation (package invocation): its
// -converge.* flags where Main registered them, and $CONVERGE_FLAGS. A bad
// one fails t.
func current(t testing.TB) invocation.Invocation {
	t.Helper()
	inv, err := invocation.Read(registered())
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// registered is the flag set holding the -converge.* flags, or nil when
// the test binary did not register them (its TestMain is not Main).
func registered() *flag.FlagSet {
	if invocation.Registered(flag.CommandLine) {
		return flag.CommandLine
	}
	return nil
}

// Main is a TestMain for a package of scenario tests:
//
//	func TestMain(m *testing.M) { os.Exit(scenariotest.Main(m)) }
//
// It registers the -converge.* flags (RegisterFlags; without them the
// invocation is read from $CONVERGE_FLAGS alone, which works in any test
// binary), prepares the process for runs once (scenarios.PrepareProcess:
// it replaces apimachinery's process-wide error and panic handling), runs
// the tests, and stops the envtest control plane and the kwok cluster they
// shared (envtest.SharedWith, cluster.StopShared). It returns the exit
// code.
//
// When $KUBEBUILDER_ASSETS is unset and converge's control-plane binaries
// are built (envtest.DefaultAssetsDir), Main sets it to their folder, so
// that an envtest suite of the package's own (kubebuilder scaffolds one
// beside the controllers) starts the same kube-apiserver and etcd.
func Main(m *testing.M) int {
	RegisterFlags()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if dir, err := envtest.FindAssets(); err == nil {
			_ = os.Setenv("KUBEBUILDER_ASSETS", dir)
		}
	}
	scenarios.PrepareProcess()
	code := m.Run()
	if err := errors.Join(envtest.StopShared(), cluster.StopShared()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	return code
}

// RegisterFlags adds the -converge.* flags to the test binary's command
// line; call it from TestMain, before the tests run (Main does).
func RegisterFlags() {
	if !invocation.Registered(flag.CommandLine) {
		invocation.Register(flag.CommandLine)
	}
}

// Run runs every scenario file of dir against c (see the package doc).
func Run(t *testing.T, dir string, c scenarios.Controller, opts ...Options) {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	inv := current(t)
	if len(inv.Files) > 0 {
		runScenarios(t, inv, nil, nil, func(*scenarios.Scenario) scenarios.Controller { return c }, o, 0)
		return
	}
	list, err := scenarios.LoadDir(dir)
	if err != nil {
		t.Fatalf("loading the scenarios of %s: %v", dir, err)
	}
	list, skips, deferred, err := plan(list, o, inv)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	runScenarios(t, inv, list, skips, func(*scenarios.Scenario) scenarios.Controller { return c }, o, deferred)
}

// plan is list as o runs it: the scenarios EnvtestScenarios leaves out on
// fake alone, and with Faults each fault-free one under every profile, on
// envtest only where FaultScenarios says so (all of them when full).
// deferred counts the runs in real time that full would add.
func plan(list []*scenarios.Scenario, o Options, inv invocation.Invocation) (_ []*scenarios.Scenario, skips []skipped, deferred int, _ error) {
	names := map[string]bool{}
	for _, s := range list {
		names[s.Name] = true
	}
	for _, field := range []struct {
		name string
		list []string
	}{{"EnvtestScenarios", o.EnvtestScenarios}, {"FaultScenarios", o.FaultScenarios}} {
		for _, n := range field.list {
			if !names[n] {
				return nil, nil, 0, fmt.Errorf("%s names %q, which is not one of its scenarios", field.name, n)
			}
		}
	}
	// fakeOnly keeps s on fake alone, counting what it leaves, or is nil
	// when s does not run on fake (no Backends would mean the default
	// ones).
	fakeOnly := func(s *scenarios.Scenario) *scenarios.Scenario {
		deferred += len(s.RunsOnBackends())
		virtual := slices.DeleteFunc(s.RunsOnBackends(), func(b string) bool { return !backends.Virtual(b) })
		if len(virtual) == 0 {
			return nil
		}
		deferred -= len(virtual)
		c := *s
		c.Backends = virtual
		return &c
	}
	var out []*scenarios.Scenario
	for _, s := range list {
		if len(o.EnvtestScenarios) > 0 && !o.full(inv) && !slices.Contains(o.EnvtestScenarios, s.Name) {
			s = fakeOnly(s)
		}
		if s != nil {
			out = append(out, s)
		}
	}
	if !o.Faults {
		return out, nil, deferred, nil
	}
	// Exploring one of them runs none of their fault profiles: each
	// process of an exploration would build them all for nothing.
	if inv.Explore != "" && slices.ContainsFunc(out, func(s *scenarios.Scenario) bool { return s.Name == inv.Explore }) {
		return out, nil, deferred, nil
	}
	profiles, err := scenarios.FaultProfiles()
	if err != nil {
		return nil, nil, 0, err
	}
	isProfile := func(name string) bool {
		return slices.ContainsFunc(profiles, func(p *scenarios.Scenario) bool { return p.Name == name })
	}
	for _, name := range slices.Sorted(maps.Keys(o.SkipProfiles)) {
		if !isProfile(name) {
			return nil, nil, 0, fmt.Errorf("SkipProfiles names %q, which is no fault profile", name)
		}
	}
	for _, s := range list {
		for _, name := range slices.Sorted(maps.Keys(s.SkipProfiles)) {
			if !isProfile(name) {
				return nil, nil, 0, fmt.Errorf("scenario %s: skipProfiles names %q, which is no fault profile", s.Name, name)
			}
		}
	}
	err = underFaults(list, func(base, u *scenarios.Scenario) {
		profile := strings.TrimPrefix(u.Name, base.Name+"-")
		if why, ok := o.SkipProfiles[profile]; ok {
			skips = append(skips, skipped{u.Name, errors.New(why)})
			return
		}
		if why, ok := base.SkipProfiles[profile]; ok {
			skips = append(skips, skipped{u.Name, fmt.Errorf("the scenario skips %s: %s", profile, why)})
			return
		}
		if len(o.FaultBackends) > 0 {
			u.Backends = slices.DeleteFunc(u.RunsOnBackends(), func(b string) bool { return !slices.Contains(o.FaultBackends, b) })
			if len(u.Backends) == 0 {
				return
			}
		}
		if !o.full(inv) && !slices.Contains(o.FaultScenarios, base.Name) {
			u = fakeOnly(u)
		}
		if u != nil {
			out = append(out, u)
		}
	}, func(name string, why error) { skips = append(skips, skipped{name, why}) })
	if err != nil {
		return nil, nil, 0, err
	}
	return out, skips, deferred, nil
}

// UnderFaults is list, and each of its scenarios without faults under each
// fault profile.
func UnderFaults(list []*scenarios.Scenario) ([]*scenarios.Scenario, error) {
	out := slices.Clone(list)
	if err := underFaults(list, func(_, u *scenarios.Scenario) { out = append(out, u) }, func(string, error) {}); err != nil {
		return nil, err
	}
	return out, nil
}

// skipped is a run that is not made, and why: a go test SKIP of its own.
type skipped struct {
	name string
	why  error
}

// underFaults calls add with each scenario of list without faults and each
// fault profile, and the scenario under that profile; skip with the name
// of one that cannot be, the two sharing no backend.
func underFaults(list []*scenarios.Scenario, add func(base, under *scenarios.Scenario), skip func(name string, why error)) error {
	profiles, err := scenarios.FaultProfiles()
	if err != nil {
		return err
	}
	for _, s := range list {
		if len(s.Faults) > 0 {
			continue
		}
		for _, p := range profiles {
			u, err := s.Under(p)
			switch {
			case errors.Is(err, scenarios.ErrNoCommonBackend):
				skip(s.Name+"-"+p.Name, err)
				continue
			case err != nil:
				return err
			}
			add(s, u)
		}
	}
	return nil
}

// RunScenarios runs list, each against the controller controllerFor gives
// it; with -converge.file, the files' scenarios instead. Of o, it takes
// EnvtestScenarios, Full, Serial, SharedControlPlane and Others (fault
// profiles are Run's; UnderFaults makes them from a list).
func RunScenarios(t *testing.T, list []*scenarios.Scenario, controllerFor func(*scenarios.Scenario) scenarios.Controller, opts ...Options) {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	inv := current(t)
	deferred := 0
	if len(inv.Files) == 0 {
		o.Faults = false
		var err error
		if list, _, deferred, err = plan(list, o, inv); err != nil {
			t.Fatal(err)
		}
	}
	runScenarios(t, inv, list, nil, controllerFor, o, deferred)
}

func runScenarios(t *testing.T, inv invocation.Invocation, list []*scenarios.Scenario, skips []skipped, controllerFor func(*scenarios.Scenario) scenarios.Controller, o Options, deferred int) {
	t.Helper()
	fromFile := map[*scenarios.Scenario]string{}
	if len(inv.Files) > 0 {
		list = nil
		for _, f := range inv.Files {
			s, err := scenarios.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			fromFile[s] = f
			list = append(list, s)
		}
	}
	seen := map[string]bool{}
	for _, s := range list {
		if seen[s.Name] {
			t.Fatalf("two scenarios named %q: their subtests and results would be one; rename one", s.Name)
		}
		seen[s.Name] = true
	}
	if inv.Explore != "" {
		exploreFlags(t, inv, list, controllerFor, o.Others)
		return
	}
	if inv.Shrink != "" {
		shrinkFlag(t, inv, list, controllerFor, o.Others)
		return
	}
	if inv.List {
		for _, s := range list {
			l := Listed{Test: t.Name(), Name: s.Name, Backends: s.RunsOnBackends(), Catches: s.Catches}
			for _, f := range s.Faults {
				l.Faults = append(l.Faults, f.Fault)
			}
			line, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Println(ListPrefix + string(line))
		}
		return
	}
	sideBySide := func(s *scenarios.Scenario) bool {
		_, oneAtATime := controllerFor(s).(scenarios.OneAtATime)
		return !o.Serial && !oneAtATime && !runsAlone(s) && (inv.Kwok == "" || !slices.ContainsFunc(s.RunsOnBackends(), backends.UsesCluster))
	}
	if err := fitsDeadline(t, inv, list, sideBySide, deferred); err != nil {
		t.Fatal(err)
	}
	// Runs share control planes and a kwok cluster: the test binary's
	// (SharedControlPlane), or this call's, stopped when the test ends.
	setup := &sim.Setup{Kubeconfig: inv.Kubeconfig, Kwok: inv.Kwok}
	if !o.SharedControlPlane {
		setup.Shared = &sim.Shared{}
		t.Cleanup(func() {
			if err := setup.Shared.Close(); err != nil {
				t.Errorf("stopping what the runs shared: %v", err)
			}
		})
	}
	logPlacement(t, list, controllerFor)
	for _, sk := range skips {
		t.Run(sk.name, func(t *testing.T) { t.Skipf("SKIPPED: %v", sk.why) })
	}
	var mu sync.Mutex
	var results []*reports.Result
	live := NewLiveness(inv.Seed, o.Others)
	for _, s := range list {
		t.Run(s.Name, func(t *testing.T) {
			if !slices.ContainsFunc(inv.Backends, s.RunsOn) {
				t.Skipf("SKIPPED: %s runs on %s, and this test on %s (-converge.backends)", s.Name, strings.Join(s.RunsOnBackends(), ", "), strings.Join(inv.Backends, ", "))
			}
			// Runs share nothing but the envtest control plane, where each
			// has its own namespace; one that needs it to itself runs
			// alone, before the others. On a kwokctl cluster runs go one at
			// a time: its Nodes are untainted, so kube-scheduler would put
			// one run's pods on another's Nodes.
			if sideBySide(s) {
				t.Parallel()
			}
			for _, backend := range inv.Backends {
				if !s.RunsOn(backend) {
					continue
				}
				t.Run(backend, func(t *testing.T) {
					for i := range uint64(inv.Seeds) {
						seed := inv.Seed + i
						t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
							res := runOne(t, inv, setup, live, s, controllerFor(s), o.Others, backend, seed, fromFile[s])
							mu.Lock()
							results = append(results, res)
							mu.Unlock()
						})
					}
				})
			}
		})
	}
	t.Cleanup(func() {
		// Driven by the converge CLI (a run ID), the CLI writes the
		// report of the whole invocation.
		if inv.Report == "" || inv.RunID != "" || len(results) == 0 {
			return
		}
		index, err := reports.WriteHTML(inv.Report, results, "")
		if err != nil {
			t.Errorf("writing the HTML report: %v", err)
			return
		}
		t.Logf("report: %s", index)
	})
}

func runOne(t *testing.T, inv invocation.Invocation, setup *sim.Setup, live *Liveness, s *scenarios.Scenario, c scenarios.Controller, others map[string]scenarios.Controller, backend string, seed uint64, file string) *reports.Result {
	t.Helper()
	scenarios.PrepareProcess()
	kind, err := backends.Named(backend)
	if err != nil {
		t.Fatal(err)
	}
	limit, stop := scenarios.WallClockLimit(inv.RunTimeout) // outside the bubble: real time
	defer stop()
	opts := scenarios.Options{Backend: kind, Setup: setup, Seed: seed, Controller: c, Others: others, Limit: limit, RunID: inv.RunID,
		Replay: replay(t, inv, backend, seed, file)}
	var res *reports.Result
	if kind.Virtual() {
		res = RunFake(t, s, opts)
	} else {
		res = scenarios.Run(context.Background(), s, opts)
	}
	if res.Unavailable {
		t.Skipf("SKIPPED (%s): %s", backend, res.Error)
	}
	if res.Error == "" { // a run not carried out has no verdict to judge again
		sameJudgedAgain(t, s, res)
	}
	if kind.Virtual() {
		live.Judge(t, s, c, res)
	}
	dir := inv.Report
	if dir == "" && !res.Pass {
		dir = filepath.Join(os.TempDir(), "converge-results")
	}
	if dir != "" {
		path, err := reports.Write(dir, res)
		if err != nil {
			t.Errorf("writing the result: %v", err)
		} else {
			t.Logf("result: %s (simulated %v, wall %v)", path, time.Duration(res.Simulated), time.Duration(res.Wall).Round(time.Millisecond))
		}
	}
	if !res.Pass {
		why := slices.Concat(res.Reasons, res.Notes)
		t.Errorf("%s on %s, seed %d, failed:\n  %s%s\nreplay: %s", s.Name, backend, seed, strings.Join(why, "\n  "), planeLogs(t, res), res.Replay)
	}
	if len(res.Unfired) > 0 {
		t.Errorf("%s on %s, seed %d: never fired: %s (the scenario proves nothing about them)\nreplay: %s", s.Name, backend, seed, strings.Join(res.Unfired, ", "), res.Replay)
	}
	switch why := res.Skipped(); {
	case why != "":
		t.Skip("SKIPPED: " + why)
	case len(res.Inapplicable) > 0 && res.Pass:
		t.Logf("note: of the fault profile's faults, %s matched no request of the controller", strings.Join(res.Inapplicable, ", "))
	}
	return res
}

// planeLogs copies the control plane's logs of a failed run into the
// test's artifacts (kept with go test -artifacts) and returns their last
// lines, for the failure message; nothing for a run on a plane that keeps
// none.
func planeLogs(t *testing.T, res *reports.Result) string {
	if len(res.PlaneLogs) == 0 {
		return ""
	}
	dir := t.ArtifactDir()
	var b strings.Builder
	fmt.Fprintf(&b, "\nthe control plane's logs (copied to %s) end with:", dir)
	for _, component := range slices.Sorted(maps.Keys(res.PlaneLogs)) {
		path := res.PlaneLogs[component]
		lines, err := text.LastLines(path, 10)
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", component, err)
			continue
		}
		if raw, err := os.ReadFile(path); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(path)), raw, 0o644)
		}
		fmt.Fprintf(&b, "\n  %s (%s):\n%s", component, path, text.Indent(string(lines), "    "))
	}
	return b.String()
}

// logPlacement says once what the runs change in the RBAC their
// controllers declare (sim.Place): a namespace the files name, such as
// kubebuilder's "system", becomes each run's own.
func logPlacement(t *testing.T, list []*scenarios.Scenario, controllerFor func(*scenarios.Scenario) scenarios.Controller) {
	t.Helper()
	seen := map[string]bool{}
	for _, s := range list {
		id := scenarios.IdentityOf(controllerFor(s))
		if id.IsZero() {
			continue
		}
		objs, err := id.Validate()
		if err != nil {
			continue // each run fails saying so
		}
		line := sim.Placed(objs)
		if line == "" || seen[id.ServiceAccount+line] {
			continue
		}
		seen[id.ServiceAccount+line] = true
		t.Logf("RBAC of service account %s: %s", id.ServiceAccount, line)
	}
}

// sameJudgedAgain judges res's history again, as saved and read back, and
// fails t unless the verdict is the live one, finding for finding: a
// verdict depends on the history alone (scenarios.Rejudge), and a
// difference is converge's bug.
func sameJudgedAgain(t *testing.T, s *scenarios.Scenario, res *reports.Result) {
	t.Helper()
	data, err := json.Marshal(res)
	if err != nil {
		t.Errorf("encoding the result: %v", err)
		return
	}
	var saved reports.Result
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Errorf("decoding the result: %v", err)
		return
	}
	again, err := scenarios.Rejudge(&saved, s)
	if err != nil {
		t.Errorf("judging the saved history again: %v", err)
		return
	}
	live, _ := json.Marshal(saved.Findings)
	judged, _ := json.Marshal(again.Findings)
	if string(live) != string(judged) || saved.Converged != again.Converged || saved.TimeToConverge != again.TimeToConverge || saved.Pass != again.Pass {
		t.Errorf("converge's bug: %s on %s, seed %d, judged again from its saved history, differs from the live verdict\n  live:   converged %v at %v, %s\n  again: converged %v at %v, %s",
			s.Name, res.Backend, res.Seed, saved.Converged, time.Duration(saved.TimeToConverge), live, again.Converged, time.Duration(again.TimeToConverge), judged)
	}
}

// replay is the command that runs t again (goTest): from where converge's
// user stands when converge ran it, else from the module's root when the
// test runs inside one, else from the package's folder.
func replay(t *testing.T, inv invocation.Invocation, backend string, seed uint64, file string) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	again := invocation.Default()
	again.Seed, again.Backends = seed, []string{backend}
	if file != "" {
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		again.Files = []string{file}
	}
	if backends.UsesCluster(backend) {
		again.Kubeconfig = inv.Kubeconfig
		if inv.Kwok != "" {
			again.Kwok = "start" // the folder may be gone by then
		}
	}
	return goTest(inv, again, strings.Join(parts, "/"))
}

// goTest is the command that runs the tests run matches, asking for inv:
// as -converge.* flags where this binary registers them (Main), else in
// $CONVERGE_FLAGS. It runs the tests as from says (converge names them
// from where its user stands), else with go test of this package from
// its module's root.
func goTest(from, inv invocation.Invocation, run string) string {
	flags := registered() != nil
	if from.ReplayBinary != "" {
		return inv.Command(flags, text.ShellQuote(from.ReplayBinary)+" -test.count=1 -test.run "+text.ShellQuote(run))
	}
	cmd := "go test"
	if from.ReplayPackage != "" {
		cmd += " " + text.ShellQuote(from.ReplayPackage)
	} else if pkg := packageFromRoot(); pkg != "" {
		cmd += " " + pkg
	}
	return inv.Command(flags, cmd+" -count=1 -run "+text.ShellQuote(run))
}

// packageFromRoot is the test's package as a path from its module's root
// (./scenarios), or "" when it cannot tell.
func packageFromRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || strings.ContainsAny(rel, " '\"\\$`") {
				return ""
			}
			if rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// startup is what a run in real time costs beyond its scenario's own
// timing at the least: a namespace, the objects, the controller's start.
const startup = 2 * time.Second

// fitsDeadline logs how many runs list makes on which backends and how
// long those in real time take at the least, and returns an error, at the
// start rather than at go test's kill, when what -test.timeout leaves
// cannot hold them.
func fitsDeadline(t *testing.T, inv invocation.Invocation, list []*scenarios.Scenario, sideBySide func(*scenarios.Scenario) bool, deferred int) error {
	t.Helper()
	parallel := 1
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			parallel = n
		}
	}
	// go test runs only what -test.run selects: the rest costs nothing.
	var selected []*scenarios.Scenario
	var kinds []string
	for _, s := range list {
		if runSelects(t, s.Name) {
			selected = append(selected, s)
		}
	}
	for _, b := range inv.Backends {
		if slices.ContainsFunc(selected, func(s *scenarios.Scenario) bool { return runSelects(t, s.Name, b) }) {
			kinds = append(kinds, b)
		}
	}
	e := estimate(selected, kinds, inv.Seeds, sideBySide, parallel)
	e.deferred = deferred
	t.Log(e)
	deadline, ok := t.Deadline()
	if !ok {
		return nil
	}
	return e.fits(time.Until(deadline))
}

// runSelects says whether -test.run may select the subtest of t at path
// (a scenario's name, then a backend's), as go test matches it: each
// element of the pattern, split at slashes, a regular expression matched
// against the name at its level.
func runSelects(t *testing.T, path ...string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	elems := splitRunPattern(f.Value.String())
	for i, name := range append(strings.Split(t.Name(), "/"), path...) {
		if i >= len(elems) {
			return true
		}
		re, err := regexp.Compile(elems[i])
		if err != nil {
			return true // go test refuses it first
		}
		if !re.MatchString(name) {
			return false
		}
	}
	return true
}

// splitRunPattern splits a -test.run pattern at the slashes outside
// brackets and parentheses.
func splitRunPattern(p string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth = max(depth-1, 0)
		case '/':
			if depth == 0 {
				out = append(out, p[start:i])
				start = i + 1
			}
		}
	}
	return append(out, p[start:])
}

// runTime is what a list of scenarios costs: its runs in virtual and in
// real time, and the least wall time of the latter.
type runTime struct {
	fake, real int
	least      time.Duration
	parallel   int
	// deferred are the runs in real time that -converge.full would add.
	deferred int
}

// estimate counts the runs of list on backends, seeds each, and the least
// time those in real time take: the runs side by side, parallel at once,
// and each of the others alone.
func estimate(list []*scenarios.Scenario, kinds []string, seeds int, sideBySide func(*scenarios.Scenario) bool, parallel int) runTime {
	e := runTime{parallel: parallel}
	var alone, together time.Duration
	for _, s := range list {
		for _, b := range kinds {
			if !s.RunsOn(b) {
				continue
			}
			if backends.Virtual(b) {
				e.fake += seeds
				continue
			}
			e.real += seeds
			least := time.Duration(seeds) * (s.Shortest() + startup)
			if sideBySide(s) {
				together += least
			} else {
				alone += least
			}
		}
	}
	e.least = alone + together/time.Duration(max(parallel, 1))
	return e
}

func (e runTime) String() string {
	msg := fmt.Sprintf("%d runs on fake (virtual time) and %d in real time, which take at least %v (%d side by side at most)",
		e.fake, e.real, e.least.Round(time.Second), e.parallel)
	if e.deferred > 0 {
		msg += fmt.Sprintf("; -converge.full adds %d more in real time", e.deferred)
	}
	return msg
}

// fits says why left cannot hold e's runs in real time, or nil.
func (e runTime) fits(left time.Duration) error {
	if e.real == 0 || e.least <= left {
		return nil
	}
	return fmt.Errorf("%v, and -test.timeout leaves %v: go test would kill the test before they end. "+
		"Give go test -timeout=%v or more, or run fewer in real time (-converge.backends=fake, without -converge.full, "+
		"fewer Options.FaultScenarios or EnvtestScenarios)", e, left.Round(time.Second), (2*e.least).Truncate(time.Minute)+time.Minute)
}

// runsAlone says whether s needs the envtest control plane to itself: it
// restarts the API server, or its objects keep kube-controller-manager
// busy enough to delay the pods of the runs beside it (beside 200
// Deployments, by up to 40 s).
func runsAlone(s *scenarios.Scenario) bool {
	if !slices.ContainsFunc(s.RunsOnBackends(), func(b string) bool { return !backends.Virtual(b) }) {
		return false
	}
	for _, f := range s.Faults {
		if p, _ := chaos.PlaneOfFault(f.Fault); p.RestartsAPIServer {
			return true
		}
	}
	return s.ObjectCount() >= 100
}

// that fails it, in order, and the run's result.
type Caught struct {
	Scenario string
	Findings []reports.Finding
	Result   *reports.Result
}

// Checks are the checks of c's findings, in order.
func (c Caught) Checks() []string {
	var out []string
	for _, f := range c.Findings {
		out = append(out, f.Check)
	}
	return out
}

// String is the scenario and every finding's sentence:
// "mirror: invariant targets-are-owned broken at 400ms: ...; did not converge ...".
func (c Caught) String() string {
	why := reports.Sentences(c.Findings, c.Result.Started)
	if len(why) == 0 {
		why = []string{"did not converge"}
	}
	return c.Scenario + ": " + strings.Join(why, "; ")
}

// Catches runs each scenario of list that runs on fake, seed 1, against c
// (a controller with a bug, say) and returns the runs that failed, each
// with every finding that failed it: what caught it. A fault profile's
// run is also judged by when it converged, against fault-free runs of its
// world (the liveness finding).
func Catches(t *testing.T, list []*scenarios.Scenario, c scenarios.Controller) []Caught {
	t.Helper()
	var caught []Caught
	live := NewLiveness(1, nil)
	for _, s := range list {
		if !s.RunsOn(fake.Name) {
			continue
		}
		scenarios.PrepareProcess()
		// Each run has the invocation's wall-clock limit, so a controller
		// that never stops (creating without end) fails its run instead of
		// holding the test.
		limit, stop := scenarios.WallClockLimit(current(t).RunTimeout)
		var res *reports.Result
		synctest.Test(t, func(t *testing.T) {
			res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: c, Limit: limit})
		})
		stop()
		if res.Error != "" {
			t.Fatalf("%s could not be run: %s", s.Name, res.Error)
		}
		live.Judge(t, s, c, res)
		if !res.Pass {
			failing := slices.DeleteFunc(slices.Clone(res.Findings), func(f reports.Finding) bool { return !f.Fails() })
			caught = append(caught, Caught{Scenario: s.Name, Findings: failing, Result: res})
		}
	}
	return caught
}
