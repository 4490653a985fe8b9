package scenariotest

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/internal/bubble"
	"github.com/converge-lab/converge/sim/fake"
)

// ExploreOptions adjust Explore.
type ExploreOptions struct {
	// References is how many fault-free runs learn the reference; zero
	// means explore.DefaultReferences. When they disagree, up to
	// explore.MaxReferencesFactor times as many run.
	References int
	// Masks add to the default masks: fields the end states may differ in.
	Masks explore.Masks
	// Dir receives the plan, every run's result and scenario, and the
	// exploration; empty means a new temporary folder.
	Dir string
	// Seed of the first reference run and of every point's run; zero
	// means -converge.seed.
	Seed uint64
	// FirstFinding stops at the first point whose run differs: enough to
	// know that something is found, in a fraction of the time.
	FirstFinding bool
	// Others are the Go values of the other controllers the scenario runs
	// beside c (Scenario.Others), by name, in every run.
	Others map[string]scenarios.Controller
	// Inputs explores the inputs instead of the faults: the changes of
	// the scenario's custom resources' specs their CRDs' schemas allow,
	// each made once the references converged and judged against a run
	// created with it (explore.InputPoint); InputRules pin, exclude or
	// add values.
	Inputs     bool
	InputRules explore.InputRules
}

// Explore explores s, a scenario without faults, with controller c on the
// fake backend: it runs s fault-free several times to learn the reference
// (what a correct run ends with, and what varies between runs), lists the
// injection points of the first reference run, runs each point (one fault)
// and judges each run by the scenario's verdict and by how its end state
// and its objects' additions and deletions differ from the references'.
// When a reference run fails, that is the finding, and no point runs: a
// controller that fails without faults has nothing to be compared with.
// Each point's scenario is written into o.Dir, and its replay command runs
// that file through t's top-level test, which must call Run or
// RunScenarios for it to work (TestScenarios does).
// Each run is a subtest of t (reference/seed-N, reference-round-K/seed-N
// when the references disagreed, then the points' IDs);
// none of them fails t: the findings are returned, and the caller
// decides.
func Explore(t *testing.T, s *scenarios.Scenario, c scenarios.Controller, o ExploreOptions) *explore.Exploration {
	t.Helper()
	began := time.Now()
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	plan, refOutcomes := explorePlanOf(t, s, c, o, dir)
	if plan == nil {
		return nil
	}
	var outcomes []explore.Outcome
	failing := slices.ContainsFunc(refOutcomes, func(o explore.Outcome) bool { return len(o.Differences) > 0 || o.Error != "" })
	if o.Inputs && !failing {
		if err := plan.PlanInputs(o.InputRules); err != nil {
			t.Error(err)
			return nil
		}
	}
	if err := plan.Write(filepath.Join(dir, "plan.json")); err != nil {
		t.Error(err)
		return nil
	}
	switch {
	case failing:
	case o.Inputs:
		outcomes = runInputs(t, plan, c, o.Others, plan.Inputs, nil, dir, o.FirstFinding, nil)
	default:
		outcomes = runPoints(t, plan, c, o.Others, plan.Points, nil, dir, o.FirstFinding, nil)
	}
	e := plan.Summarise(c.Name(), refOutcomes, outcomes, time.Since(began))
	if err := e.Write(filepath.Join(dir, "exploration.json")); err != nil {
		t.Errorf("writing the exploration: %v", err)
	}
	return e
}

// explorePlanOf runs the references and builds the plan; nil when it
// cannot (t then has failed).
func explorePlanOf(t *testing.T, s *scenarios.Scenario, c scenarios.Controller, o ExploreOptions, dir string) (*explore.Plan, []explore.Outcome) {
	t.Helper()
	if err := explore.Check(s); err != nil {
		t.Error(err)
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return nil, nil
	}
	seed := cmp.Or(o.Seed, current(t).Seed)
	n := o.References
	if n == 0 {
		n = explore.DefaultReferences
	}
	var refs []*reports.Result
	var outcomes []explore.Outcome
	// More references when they disagree: a controller's own randomness
	// is learnt before any point is judged.
	// A round's references run side by side where the controllers allow
	// it (none is OneAtATime), as the catalogue's runs do: they are the
	// part of an exploration no point can start before.
	apart := oneAtATime(c, o.Others)
	group := "reference"
	for k, runs := 1, explore.References(s, seed, max(n, 2)); len(runs) > 0; k, runs = k+1, explore.MoreReferences(s, seed, n, refs, o.Masks) {
		if k > 1 {
			group = fmt.Sprintf("reference-round-%d", k)
		}
		round := make([]*reports.Result, len(runs))
		files := make([]string, len(runs))
		t.Run(group, func(t *testing.T) {
			for i, ref := range runs {
				t.Run(fmt.Sprintf("seed-%d", ref.Seed), func(t *testing.T) {
					if !apart {
						t.Parallel()
					}
					round[i] = exploreRun(t, ref.Scenario, c, o.Others, ref.Seed, "")
					files[i], _ = reports.Write(dir, round[i])
				})
			}
		})
		for i, res := range round {
			if res == nil {
				t.Error("a reference run returned no result")
				return nil, nil
			}
			refs = append(refs, res)
			outcomes = append(outcomes, explore.RefOutcome(res, filepath.Base(files[i])))
		}
	}
	plan, err := explore.NewPlan(s, fake.Name, seed, refs, o.Masks)
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	return plan, outcomes
}

// runPoints runs points of plan, one subtest each, and judges each run;
// with pages, it writes each run's page beside its result.
func runPoints(t *testing.T, plan *explore.Plan, c scenarios.Controller, others map[string]scenarios.Controller, points []explore.Point, take func(k int) bool, dir string, first bool, pages *pageLog) []explore.Outcome {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "points"), 0o755); err != nil {
		t.Error(err)
		return nil
	}
	root, _, _ := strings.Cut(t.Name(), "/")
	var out []explore.Outcome
	for k, pt := range points {
		if first && len(out) > 0 && len(out[len(out)-1].Differences) > 0 {
			break
		}
		if take != nil && !take(k) {
			continue
		}
		t.Run(pt.ID, func(t *testing.T) {
			s := plan.ScenarioOf(pt)
			file := filepath.Join(dir, "points", s.Name+".yaml")
			if err := writeScenario(file, s); err != nil {
				t.Error(err)
				return
			}
			res := exploreRun(t, s, c, others, plan.Seed, fileReplay(current(t), root, s.Name, plan.Seed, file))
			path, err := reports.Write(dir, res)
			if err != nil {
				t.Errorf("writing the result: %v", err)
			}
			o := plan.Outcome(pt, res, filepath.Base(path))
			o.File = file
			o.Page = err == nil && pages.write(t, res)
			out = append(out, o)
		})
	}
	return out
}

// found says whether an outcome differed.
func found(outcomes []explore.Outcome) bool {
	return slices.ContainsFunc(outcomes, func(o explore.Outcome) bool { return len(o.Differences) > 0 })
}

// runInputs runs input points of plan, one subtest each (its round trip,
// or its runs apart when the round trip cannot stand for them: runInput),
// and judges each. A point that fails is shrunk
// (Plan.ShrinkInput), each candidate a subtest of the point's. With pages,
// it writes the page of each point's result beside it (not of the
// candidates').
func runInputs(t *testing.T, plan *explore.Plan, c scenarios.Controller, others map[string]scenarios.Controller, points []explore.InputPoint, take func(k int) bool, dir string, first bool, pages *pageLog) []explore.Outcome {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "points"), 0o755); err != nil {
		t.Error(err)
		return nil
	}
	root, _, _ := strings.Cut(t.Name(), "/")
	var out []explore.Outcome
	for k, pt := range points {
		if first && found(out) {
			break
		}
		if take != nil && !take(k) {
			continue
		}
		t.Run(pt.ID, func(t *testing.T) {
			o := runInput(t, plan, c, others, pt, dir, root, pages)
			if len(o.Differences) > 0 && o.Error == "" {
				run := func(cand explore.InputPoint) explore.Outcome {
					var co explore.Outcome
					t.Run(cand.ID, func(t *testing.T) { co = runInput(t, plan, c, others, cand, dir, root, nil) })
					return co
				}
				small, so, runs := plan.ShrinkInput(pt, o, run, explore.DefaultInputShrinkRuns)
				o.ShrinkRuns = runs
				if small.ID != pt.ID {
					o.Shrunk = &so
					t.Logf("shrunk to %s: %s", small.ID, small.Signature())
				}
			}
			out = append(out, o)
		})
	}
	return out
}

// runInput runs pt's round trip (InputPoint.RoundTrip) and judges it;
// when it cannot stand for pt's other runs (Plan.RoundTripOf), it runs
// pt's fresh and recovery runs, and its transition run when the recovery
// run cannot stand for it (Plan.TransitionOf), and judges them. It writes
// their scenario files and results into dir, and with pages the page of
// the result the outcome names.
func runInput(t *testing.T, plan *explore.Plan, c scenarios.Controller, others map[string]scenarios.Controller, pt explore.InputPoint, dir, root string, pages *pageLog) explore.Outcome {
	t.Helper()
	written := map[string]*reports.Result{} // by result file
	run := func(s *scenarios.Scenario) (*reports.Result, string, string, error) {
		file := filepath.Join(dir, "points", s.Name+".yaml")
		if err := writeScenario(file, s); err != nil {
			t.Error(err)
			return nil, "", "", err
		}
		res := exploreRun(t, s, c, others, plan.Seed, fileReplay(current(t), root, s.Name, plan.Seed, file))
		path, err := reports.Write(dir, res)
		if err != nil {
			t.Errorf("writing the result: %v", err)
		} else {
			written[filepath.Base(path)] = res
		}
		return res, filepath.Base(path), file, nil
	}
	judge := func() explore.Outcome {
		round, result, file, err := run(pt.RoundTrip(plan.Scenario))
		if err != nil {
			return explore.Outcome{Point: pt.Point(), Error: err.Error()}
		}
		if o, ok := plan.RoundTripOutcome(pt, round, result); ok {
			o.File = file
			return o
		}
		t.Logf("%s: the round trip cannot stand for the runs of the point (it missed a write, or had not gone quiet before one): running them", pt.ID)
		fresh, _, _, err := run(pt.Fresh(plan.Scenario))
		if err != nil {
			return explore.Outcome{Point: pt.Point(), Error: err.Error()}
		}
		recovery, result, file, err := run(pt.Recovery(plan.Scenario))
		if err != nil {
			return explore.Outcome{Point: pt.Point(), Error: err.Error()}
		}
		var transition *reports.Result
		if _, ok := plan.TransitionOf(pt, recovery); !ok {
			if transition, result, file, err = run(pt.Transition(plan.Scenario)); err != nil {
				return explore.Outcome{Point: pt.Point(), Error: err.Error()}
			}
		}
		o := plan.InputOutcome(pt, transition, fresh, recovery, result)
		o.Wall += round.Wall
		o.File = file
		return o
	}
	o := judge()
	if res := written[o.Result]; res != nil {
		o.Page = pages.write(t, res)
	}
	return o
}

// pageLog writes the pages of a points' process's runs beside their
// results and keeps their summaries, which the process leaves for the
// report (reports.WriteSummaries): the report then reads none of those
// runs' files.
type pageLog struct {
	dir       string
	mu        sync.Mutex
	summaries []*reports.Result // without their histories
}

// write writes res's page into the log's folder (reports.WritePage),
// saying whether it did: a page that could not be written is left to the
// report, which renders it from the result. A nil log writes none.
func (l *pageLog) write(t *testing.T, res *reports.Result) bool {
	if l == nil {
		return false
	}
	if err := reports.WritePage(l.dir, res); err != nil {
		t.Logf("writing the page of %s: %v (the report renders it)", res.FileName(), err)
		return false
	}
	s := *res
	s.History = reports.History{}
	l.mu.Lock()
	l.summaries = append(l.summaries, &s)
	l.mu.Unlock()
	return true
}

// exploreRun runs s once on fake, keeping its end state.
func exploreRun(t *testing.T, s *scenarios.Scenario, c scenarios.Controller, others map[string]scenarios.Controller, seed uint64, replay string) *reports.Result {
	inv := current(t)
	limit, stop := scenarios.WallClockLimit(inv.RunTimeout)
	defer stop()
	opts := scenarios.Options{Seed: seed, Controller: c, Others: others, Limit: limit, RunID: inv.RunID, Replay: replay, EndState: true}
	return RunFake(t, s, opts)
}

// RunFake runs s on the fake backend (or the virtual kind opts names) in a
// synctest bubble of t. Goroutines of the controller that outlive the run,
// blocked for good, are a verdict (clean-shutdown broken), not a crash of
// the test: they stay blocked in the dead bubble.
//
// A goroutine waiting for a mutex is not blocked for good to synctest, so
// one waiting for a lock that a goroutine blocked for good holds keeps
// the bubble from ending, and from advancing its clock, for ever
// (controller-runtime's priority queue before v0.25 does it when a
// controller stops in process). When every goroutine of the bubble stays
// blocked, unchanged, for stuckAfter of wall time, RunFake leaves the
// bubble behind: after the run had its result (it returned, or waits for
// its goroutines to wind down), that is a clean-shutdown finding; before,
// the run stopped in virtual time and ends as the harness's error,
// without a verdict. Either names the goroutines.
func RunFake(t *testing.T, s *scenarios.Scenario, opts scenarios.Options) *reports.Result {
	t.Helper()
	scenarios.PrepareProcess()
	if opts.Backend == nil {
		opts.Backend = fake.Kind{}
	}
	name := ""
	if opts.Controller != nil {
		name = opts.Controller.Name()
	}
	var res *reports.Result
	var leaked any
	var id atomic.Int64
	began := time.Now()
	ended := make(chan struct{}) // synctest.Test returned or panicked
	ran := make(chan struct{})   // the run returned, inside the bubble
	go func() {
		defer close(ended)
		defer func() { leaked = recover() }()
		synctest.Test(t, func(t *testing.T) {
			id.Store(int64(bubble.ID()))
			defer close(ran)
			res = scenarios.Run(t.Context(), s, opts)
		})
	}()
	var gs []goroutine
	if stuck := awaitBubble(&id, ended); stuck != nil {
		gs = stuck.goroutines
		kept, lingered := bubble.Kept(int(id.Load()))
		select {
		case <-ran:
			leaked = stuck // the run returned; some of its goroutines never will
		default:
			if lingered {
				// The run had its result and waited for its
				// goroutines to wind down: the same, but for the
				// bubble's own two, the run's and synctest's.
				gs = slices.DeleteFunc(gs, func(g goroutine) bool {
					return slices.ContainsFunc(g.Funcs, func(fn string) bool {
						return strings.HasPrefix(fn, "testing/synctest.") || strings.HasSuffix(fn, "/internal/bubble.Linger")
					})
				})
				res, leaked = kept.(*reports.Result), &errStuck{goroutines: gs}
				break
			}
			// The ones that stop the clock: not blocked for good.
			rest, _ := leakReport(slices.DeleteFunc(slices.Clone(gs), func(g goroutine) bool { return strings.Contains(g.State, "(durable)") }))
			_, notes := leakReport(gs)
			return &reports.Result{Schema: reports.SchemaVersion, Scenario: s.Name, Backend: opts.Backend.Name(), Seed: opts.Seed, Controller: name,
				Replay: opts.Replay, RunID: opts.RunID, Notes: notes, Wall: reports.Duration(time.Since(began)),
				Error: fmt.Sprintf("the run stopped in virtual time: %v: %s", stuck, strings.Join(append(rest, notes...), "; "))}
		}
	}
	if res == nil {
		res = &reports.Result{Schema: reports.SchemaVersion, Scenario: s.Name, Backend: opts.Backend.Name(), Seed: opts.Seed, Controller: name,
			Replay: opts.Replay, RunID: opts.RunID, Error: fmt.Sprintf("the run did not finish: %v", leaked)}
	}
	if leaked != nil && res.Error == "" {
		// The goroutines left stay as they were: say where they are
		// blocked, and leave a library's known leak unjudged.
		if gs == nil {
			gs = bubble.Of(int(id.Load()))
		}
		rest, notes := leakReport(gs)
		res.Notes = append(res.Notes, notes...)
		if len(rest) > 0 || len(notes) == 0 {
			res.Pass = false
			detail := fmt.Sprintf("goroutines of the controller outlived the run: %v", leaked)
			if len(rest) > 0 {
				detail += ": " + strings.Join(rest, "; ")
			}
			f := reports.Finding{Check: scenarios.InvCleanShutdown, Kind: reports.KindLeak, Detail: detail}
			res.Findings = append(res.Findings, f)
			v := f.Violation()
			v.At = res.Started.Add(time.Duration(res.Simulated))
			res.Violations = append(res.Violations, v)
			res.Reasons = reports.Sentences(res.Findings, res.Started)
		}
	}
	res.Wall = reports.Duration(time.Since(began)) // the bubble's clock is virtual
	return res
}

// writeScenario saves s as a scenario file converge run and -converge.file
// read.
func writeScenario(file string, s *scenarios.Scenario) error {
	j, err := json.Marshal(s)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	return os.WriteFile(file, y, 0o644)
}

// fileReplay is the command that runs scenario file through the test root
// (one that calls Run or RunScenarios) on fake, run as from says (goTest).
func fileReplay(from invocation.Invocation, root, name string, seed uint64, file string) string {
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	inv := invocation.Default()
	inv.Seed, inv.Backends, inv.Files = seed, []string{fake.Name}, []string{file}
	return goTest(from, inv, fmt.Sprintf("^%s$/^%s$/^%s$/^seed-%d$", regexp.QuoteMeta(root), regexp.QuoteMeta(name), regexp.QuoteMeta(fake.Name), seed))
}

// exploreFlags runs the exploration the -converge.explore flags ask for,
// on the scenario of list so named. It fails t on findings.
func exploreFlags(t *testing.T, inv invocation.Invocation, list []*scenarios.Scenario, controllerFor func(*scenarios.Scenario) scenarios.Controller, others map[string]scenarios.Controller) {
	t.Helper()
	var s *scenarios.Scenario
	var names []string
	for _, l := range list {
		names = append(names, l.Name)
		if l.Name == inv.Explore {
			s = l
		}
	}
	if s == nil {
		t.Fatalf("-converge.explore=%s: no such scenario; there are: %s", inv.Explore, strings.Join(names, ", "))
	}
	c := controllerFor(s)
	if inv.ExploreWithoutFaults {
		s = explore.WithoutFaults(s)
	}
	dir := inv.Report
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "converge-explore", s.Name)
	}
	switch {
	case inv.ExploreShard != "":
		if inv.ExplorePlan == "" {
			t.Fatal("-converge.explore-shard needs -converge.explore-plan")
		}
		shard := inv.ExploreShard
		if shard == invocation.ShardFromStdin {
			line, err := bufio.NewReader(os.Stdin).ReadString('\n')
			if shard = strings.TrimSpace(line); shard == "" {
				t.Logf("-converge.explore-shard=%s: no shard given (%v): nothing to run", invocation.ShardFromStdin, err)
				return
			}
		}
		i, n, err := ParseShard(shard)
		if err != nil {
			t.Fatalf("-converge.explore-shard: %v", err)
		}
		plan, err := explore.ReadPlan(inv.ExplorePlan)
		if err != nil {
			t.Fatal(err)
		}
		points, inputs := plan.Shard(i, n), plan.InputShard(i, n)
		var take func(k int) bool
		// The references' pages, by the process that ran shard k%n of them.
		ref := func(k int) bool { return k%n == i }
		if inv.ExploreClaims != "" {
			points, inputs = plan.Points, explore.LongestFirst(plan.Inputs)
			claim := claimer(t, inv.ExploreClaims)
			take = func(k int) bool { return claim(strconv.Itoa(k)) }
			ref = func(k int) bool { return claim("reference-" + strconv.Itoa(k)) }
		}
		pages := &pageLog{dir: dir}
		var outcomes []explore.Outcome
		if inv.ExploreInputs {
			outcomes = runInputs(t, plan, c, others, inputs, take, dir, false, pages)
		} else {
			outcomes = runPoints(t, plan, c, others, points, take, dir, false, pages)
		}
		// The references' pages too, which the report would render once
		// the last point is done: a process that has run its points renders
		// them while the others run their last.
		for k, res := range plan.References {
			if ref(k) {
				pages.write(t, res)
			}
		}
		// Without its summaries, the report reads the runs' files.
		if err := reports.WriteSummaries(filepath.Join(dir, fmt.Sprintf("summaries-%d.json", i)), pages.summaries); err != nil {
			t.Logf("writing the summaries of the pages written: %v (the report reads the runs' files)", err)
		}
		b, err := json.Marshal(outcomes)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("outcomes-%d.json", i)), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	case inv.ExplorePlan != "":
		plan, refs := explorePlanOf(t, s, c, ExploreOptions{Others: others}, dir)
		if plan == nil {
			return
		}
		if inv.ExploreInputs && !found(refs) && !slices.ContainsFunc(refs, func(o explore.Outcome) bool { return o.Error != "" }) {
			if err := plan.PlanInputs(explore.InputRules{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := plan.Write(inv.ExplorePlan); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(refs)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "outcomes-references.json"), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	default:
		e := Explore(t, s, c, ExploreOptions{Dir: dir, Others: others, Inputs: inv.ExploreInputs})
		if e == nil {
			return
		}
		index, err := explore.WriteReport(dir, e)
		if err != nil {
			t.Errorf("writing the report: %v", err)
		}
		t.Logf("%s\nexploration: %s\nreport: %s", e.Text(), filepath.Join(dir, "exploration.json"), index)
		if len(e.Findings) > 0 {
			t.Errorf("%d findings", len(e.Findings))
		}
	}
}

// claimer is how processes that share work through dir take a piece of
// it, named (the k-th point of their list is "k"): the first to create
// dir/name has it. A claim that fails for another reason than another
// process's is the test's error, and the piece is not done here. dir must
// be new to the exploration: an earlier one's claims would take its
// points.
func claimer(t *testing.T, dir string) func(name string) bool {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("-converge.explore-claims: %v", err)
	}
	return func(name string) bool {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("-converge.explore-claims: %v", err)
			}
			return false
		}
		_ = f.Close()
		return true
	}
}

// ParseShard reads "i/n" (0 <= i < n).
func ParseShard(v string) (i, n int, err error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("%q: want i/n with 0 <= i < n", v)
	}
	return i, n, nil
}

// oneAtATime says whether c or one of others is scenarios.OneAtATime.
func oneAtATime(c scenarios.Controller, others map[string]scenarios.Controller) bool {
	if _, ok := c.(scenarios.OneAtATime); ok {
		return true
	}
	for _, o := range others {
		if _, ok := o.(scenarios.OneAtATime); ok {
			return true
		}
	}
	return false
}
