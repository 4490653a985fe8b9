package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/kwok"
)

type runFlags struct {
	parallel   int
	shard      string
	backends   []string
	seeds      string
	report     string
	junit      string
	kubeconfig string
	kwok       bool
	// kwokDir is the folder of the kwokctl cluster started for --kwok.
	kwokDir    string
	testBinary string
	pkg        string
	testRun    string
	runTimeout time.Duration
}

// testFlags are the flags that say which compiled tests run the scenarios.
func (f *runFlags) testFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.pkg, "package", "", "a Go package whose tests run scenarios through scenariotest (built with go test -c; default: the scaler's catalogue)")
	cmd.Flags().StringVar(&f.testBinary, "test-binary", "", "a compiled test binary (go test -c) whose tests run scenarios through scenariotest; it runs in the current folder (default: the scaler's catalogue)")
	cmd.Flags().StringVar(&f.testRun, "test-run", defaultTestRun, "the tests of --package or --test-binary that run scenarios (a go test -run pattern)")
}

// defaultRunTimeout is the wall-clock limit of one run unless --run-timeout
// says otherwise: a run on fake takes seconds, one on envtest minutes.
const defaultRunTimeout = 15 * time.Minute

func runCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [SCENARIO | FILE.yaml ...]",
		Short: "Run scenarios (all of the catalogue, or of --package, by default) on backends with seeds",
		Long: `Run scenarios on backends with seeds. Without --package or --test-binary
they run against the scaler, from its catalogue; with one of them, against
the controller of that package's tests (a test that calls scenariotest.Run),
from its own scenarios. A SCENARIO is a name those tests list; a FILE.yaml
runs against their controller instead of their own scenarios.`,
		RunE: func(_ *cobra.Command, args []string) error {
			return runScenarios(ctx, f, args, stdout, stderr)
		},
	}
	cmd.Flags().StringSliceVar(&f.backends, "backend", []string{fake.Name}, "backends: "+strings.Join(backends.Names(), ", ")+" (comma-separated or repeated)")
	cmd.Flags().StringVar(&f.seeds, "seeds", "1", `seeds: "7" runs seed 7, "1-20" a range, "3,9,12" a list (at most 10000)`)
	cmd.Flags().StringVar(&f.report, "report", "", "folder for the results (default: a new folder under the system's temp dir); other files in it are left alone")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write JUnit XML here")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster backend")
	cmd.Flags().BoolVar(&f.kwok, "kwok", false, "run the cluster backend on a kwokctl cluster of processes started for this invocation and deleted after it (make assets builds its binaries)")
	f.testFlags(cmd)
	cmd.Flags().DurationVar(&f.runTimeout, "run-timeout", defaultRunTimeout, "wall-clock limit of one run; a run that passes it ends as an error")
	cmd.Flags().IntVar(&f.parallel, "parallel", runtime.NumCPU(), "processes side by side: each run on fake has a process of its own; the runs of a seed on envtest or a cluster share one, one such at a time")
	cmd.Flags().StringVar(&f.shard, "shard", "", "i/n: run only shard i (from 0) of n of the runs asked for (every n-th of them sorted by scenario, backend and seed); converge merge joins the shards' reports")
	return cmd
}

// plan is one invocation of run: its flags checked, what it runs, and the
// ID its results carry.
type plan struct {
	runFlags
	seedList []uint64
	sel      selection
	tests    *tests
	// own are the tests' own scenarios that run, files those of the
	// scenario files.
	own, files []scenariotest.Listed
	// runs are what this invocation runs: its shard of expected().
	runs  []runKey
	shard shard
	runID string
}

// check validates every flag before any run starts, so a mistake costs
// nothing, then asks the compiled tests what they would run.
func (f runFlags) check(ctx context.Context, args []string, stderr io.Writer) (*plan, error) {
	p := &plan{runFlags: f}
	var errs []error
	seeds, err := seedList(f.seeds)
	if err != nil {
		errs = append(errs, err)
	}
	p.seedList = seeds
	if len(f.backends) == 0 {
		errs = append(errs, errors.New("--backend: name at least one of "+strings.Join(backends.Names(), ", ")))
	}
	for _, b := range f.backends {
		if _, err := backends.Named(b); err != nil {
			errs = append(errs, fmt.Errorf("--backend: %w", err))
		}
	}
	onCluster := slices.DeleteFunc(slices.Clone(f.backends), func(b string) bool { return !backends.UsesCluster(b) })
	switch {
	case f.kwok && len(onCluster) == 0:
		errs = append(errs, errors.New("--kwok is for a backend that runs on a cluster"))
	case f.kwok && f.kubeconfig != "":
		errs = append(errs, errors.New("--kwok starts a cluster of its own: drop --kubeconfig"))
	case f.kwok:
		if _, _, err := kwok.Binaries(""); err != nil {
			errs = append(errs, fmt.Errorf("--kwok: %w", err))
		}
	case len(onCluster) > 0:
		if f.kubeconfig == "" {
			errs = append(errs, fmt.Errorf("--backend %s needs --kubeconfig or --kwok", onCluster[0]))
		} else if err := userfile.Check(f.kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if f.runTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--run-timeout must be positive, got %v", f.runTimeout))
	}
	if f.parallel < 1 {
		errs = append(errs, fmt.Errorf("--parallel must be at least 1, got %d", f.parallel))
	}
	if p.shard, err = parseShard(f.shard); err != nil {
		errs = append(errs, err)
	}
	if f.testBinary != "" && f.pkg != "" {
		errs = append(errs, errors.New("--test-binary and --package both name the tests; pass one"))
	}
	if _, err := regexp.Compile(f.testRun); err != nil {
		errs = append(errs, fmt.Errorf("--test-run: %w", err))
	}
	if f.testBinary != "" {
		if st, err := os.Stat(f.testBinary); err != nil {
			errs = append(errs, fmt.Errorf("--test-binary: %w", err))
		} else if err := userfile.Regular(f.testBinary, st.Mode()); err != nil {
			errs = append(errs, fmt.Errorf("--test-binary: %w", err))
		} else if st.Mode().Perm()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("--test-binary %s: not an executable file", f.testBinary))
		}
	}
	if len(errs) > 0 {
		return nil, usageError{errors.Join(errs...)}
	}
	if p.sel, err = selectScenarios(args); err != nil {
		return nil, err
	}
	if p.report == "" {
		if p.report, err = os.MkdirTemp("", "converge-report-"); err != nil {
			return nil, err
		}
	}
	if p.report, err = filepath.Abs(p.report); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.report, 0o755); err != nil {
		return nil, usageError{fmt.Errorf("--report: %w", err)}
	}
	if p.junit != "" {
		// Found now, not after an hour of runs.
		if err := userfile.Writable(p.junit); err != nil {
			return nil, usageError{fmt.Errorf("--junit: %w", err)}
		}
	}
	if p.tests, err = findTests(ctx, f, stderr); err != nil {
		return nil, err
	}
	if len(p.sel.files) == 0 || len(p.sel.names) > 0 {
		if p.own, err = p.tests.list(ctx, nil); err != nil {
			return nil, err
		}
		if p.own, err = pick(p.own, p.sel.names); err != nil {
			return nil, err
		}
	}
	if len(p.sel.files) > 0 {
		if p.files, err = p.tests.list(ctx, p.sel.files); err != nil {
			return nil, err
		}
	}
	if len(p.expected()) == 0 {
		var on []string
		for _, s := range p.listed() {
			on = append(on, fmt.Sprintf("%s runs on %s", s.Name, strings.Join(s.Backends, ",")))
		}
		return nil, usageError{fmt.Errorf("nothing to run on --backend %s: %s", strings.Join(p.backends, ","), strings.Join(on, "; "))}
	}
	p.runs = p.shard.pick(p.expected())
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	p.runID = hex.EncodeToString(id)
	return p, nil
}

// selection is what to run: scenario names and scenario files.
type selection struct {
	names []string
	files []string
}

// pick keeps the listed scenarios names names, all of them for none.
func pick(listed []scenariotest.Listed, names []string) ([]scenariotest.Listed, error) {
	if len(names) == 0 {
		return listed, nil
	}
	var out []scenariotest.Listed
	for _, n := range names {
		i := slices.IndexFunc(listed, func(l scenariotest.Listed) bool { return l.Name == n })
		if i < 0 {
			var have []string
			for _, l := range listed {
				have = append(have, l.Name)
			}
			return nil, usageError{fmt.Errorf("no scenario named %q; there are: %s", n, strings.Join(have, ", "))}
		}
		out = append(out, listed[i])
	}
	return out, nil
}

// listed is everything that runs.
func (p *plan) listed() []scenariotest.Listed { return slices.Concat(p.own, p.files) }

// selectScenarios checks the arguments: each a scenario name or a
// scenario file, no two runs under one name.
func selectScenarios(args []string) (selection, error) {
	var sel selection
	from := map[string]string{}
	for _, a := range args {
		var name, what string
		if strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml") || strings.HasSuffix(a, ".json") {
			abs, err := filepath.Abs(a)
			if err != nil {
				return sel, err
			}
			s, err := scenarios.Load(abs)
			if err != nil {
				return sel, usageError{err}
			}
			sel.files = append(sel.files, abs)
			name, what = s.Name, abs
		} else {
			if err := scenarios.CheckName(a); err != nil {
				return sel, usageError{fmt.Errorf("scenario name %q: %w", a, err)}
			}
			sel.names = append(sel.names, a)
			name, what = a, "the tests' own scenarios"
		}
		if other, dup := from[name]; dup {
			return sel, usageError{fmt.Errorf("two scenarios named %q (%s and %s): their results would overwrite each other; rename one", name, other, what)}
		}
		from[name] = what
	}
	return sel, nil
}

// clusterFlag is the flag that reaches p's cluster again: --kwok starts
// another.
func (p *plan) clusterFlag() string {
	switch {
	case p.kwok:
		return " --kwok"
	case p.kubeconfig != "":
		path, err := filepath.Abs(p.kubeconfig)
		if err != nil {
			path = p.kubeconfig
		}
		return " --kubeconfig " + text.ShellQuote(path)
	}
	return ""
}

// startKwok starts the kwokctl cluster of --kwok when a run of p is on the
// cluster backend; stop deletes it.
func (p *plan) startKwok(ctx context.Context, stdout, stderr io.Writer) (stop func(), err error) {
	if !p.kwok || !slices.ContainsFunc(p.runs, func(k runKey) bool { return backends.UsesCluster(k.backend) }) {
		return func() {}, nil
	}
	kc, err := kwok.Start(ctx, kwok.Options{})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "kwok cluster %s ready in %v\n", kc.Name(), kc.Started.Round(time.Millisecond))
	p.kwokDir = kc.Workdir()
	release := hold(ctx, kwokHeld(kc))
	return func() {
		if err := kc.Stop(); err != nil {
			fmt.Fprintf(stderr, "deleting the kwok cluster: %v\n", err)
		}
		release()
	}, nil
}

func runScenarios(ctx context.Context, f runFlags, args []string, stdout, stderr io.Writer) error {
	p, err := f.check(ctx, args, stderr)
	if err != nil {
		return err
	}
	if len(p.runs) == 0 {
		fmt.Fprintf(stdout, "shard %d/%d has no runs: the invocation asks for %d in all\n", p.shard.index, p.shard.count, len(p.expected()))
		return nil
	}
	began := time.Now()
	stop, err := p.startKwok(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer stop()
	runErr := runCompiled(ctx, p, stdout, stderr)
	if runErr != nil && ctx.Err() == nil && !errors.As(runErr, new(*childError)) {
		return runErr
	}
	results, missing := p.collect()
	if len(missing) == 0 && errors.As(runErr, new(*childError)) {
		// The tests' process exits 1 when a verdict fails; every run it
		// owed left its result, which says why.
		runErr = nil
	}
	err = summarise(results, missing, summary{report: p.report, junit: p.junit, flag: p.tests.flag, cluster: p.clusterFlag(), log: true, notRun: p.notRun()}, time.Since(began), stdout)
	return errors.Join(runErr, err)
}

// runKey is one run the invocation asked for.
type runKey struct {
	scenario, backend string
	seed              uint64
	// test runs it, from a scenario file if file.
	test string
	file bool
}

func (k runKey) String() string { return fmt.Sprintf("%s/%s/seed-%d", k.scenario, k.backend, k.seed) }

// expected lists the runs the invocation asked for, before --shard.
func (p *plan) expected() []runKey {
	var out []runKey
	for i, s := range p.listed() {
		for _, b := range p.backends {
			if !slices.Contains(s.Backends, b) {
				continue
			}
			for _, seed := range p.seedList {
				out = append(out, runKey{scenario: s.Name, backend: b, seed: seed, test: s.Test, file: i >= len(p.own)})
			}
		}
	}
	return out
}

// notRun are the scenarios the invocation lists on a backend it asks for
// that the scenario does not run on: skips with their reason, said by the
// first shard only.
func (p *plan) notRun() []reports.NotRun {
	if p.shard.index != 0 {
		return nil
	}
	var out []reports.NotRun
	for _, s := range p.listed() {
		for _, b := range p.backends {
			if !slices.Contains(s.Backends, b) {
				out = append(out, reports.NotRun{Scenario: s.Name, Backend: b,
					Why: fmt.Sprintf("%s does not run on %s: it runs on %s", s.Name, b, strings.Join(s.Backends, ", "))})
			}
		}
	}
	return out
}

// collect reads the results of this invocation: for each run it asked for,
// the result file of that name carrying this invocation's ID. Nothing else
// in the folder is read. It returns the runs that left no such result.
func (p *plan) collect() ([]*reports.Result, []runKey) {
	return p.resultsOf(p.runs)
}

// unfinished are the scenarios of u that left no result.
func (p *plan) unfinished(u *unit) []string {
	var keys []runKey
	for _, name := range u.names {
		keys = append(keys, runKey{scenario: name, backend: u.backend, seed: u.seed, test: u.test, file: u.files})
	}
	_, missing := p.resultsOf(keys)
	var out []string
	for _, k := range missing {
		out = append(out, k.scenario)
	}
	return out
}

// resultsOf reads the results of runs, and says which left none.
func (p *plan) resultsOf(runs []runKey) ([]*reports.Result, []runKey) {
	entries, _ := os.ReadDir(p.report)
	byPrefix := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") {
			continue
		}
		// scenario_backend_seed.json or scenario_backend_seed_controller.json
		parts := strings.SplitN(strings.TrimSuffix(name, ".json"), "_", 4)
		if len(parts) < 3 {
			continue
		}
		key := strings.Join(parts[:3], "_")
		byPrefix[key] = append(byPrefix[key], name)
	}
	var results []*reports.Result
	var missing []runKey
	for _, k := range runs {
		found := false
		for _, name := range byPrefix[fmt.Sprintf("%s_%s_%d", k.scenario, k.backend, k.seed)] {
			r, err := reports.Read(filepath.Join(p.report, name))
			if err != nil || r.RunID != p.runID {
				continue
			}
			results = append(results, r)
			found = true
		}
		if !found {
			missing = append(missing, k)
		}
	}
	return results, missing
}

// childError is the scenario tests' process failing for a reason of its
// own (not a failed verdict): the runs it owed have no result.
type childError struct {
	bin      string
	err      error
	output   []string
	sequence int
	// log is where the whole output is, when it is kept.
	log string
}

func (e *childError) Error() string {
	msg := fmt.Sprintf("the scenario tests (%s) failed: %v", e.bin, e.err)
	if len(e.output) > 0 {
		msg += "; their last output:\n  " + strings.Join(e.output, "\n  ")
	}
	if e.log != "" {
		msg += "\nthe whole of it: " + e.log
	}
	return msg
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	mu      sync.Mutex
	max     int
	partial []byte
	lines   []string
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range b {
		if c == '\n' {
			w.lines = append(w.lines, string(w.partial))
			if len(w.lines) > w.max {
				w.lines = w.lines[1:]
			}
			w.partial = w.partial[:0]
			continue
		}
		if len(w.partial) < 400 {
			w.partial = append(w.partial, c)
		}
	}
	return len(b), nil
}

// readLine returns the next line, at most maxLine bytes of it.
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	out := string(line)
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = br.ReadSlice('\n')
	}
	return strings.TrimRight(out, "\r\n"), err
}

// summary says where summarise writes: the results folder, JUnit, how to
// name the tests again on a command line, and whether the folder holds the
// controllers' log.
type summary struct {
	report, junit, flag string
	// cluster is the flag that replays a cluster run: --kwok or
	// --kubeconfig PATH.
	cluster string
	log     bool
	// notRun are scenarios asked for on a backend they do not run on.
	notRun []reports.NotRun
}

// summarise prints the failures with their replay commands, the runs that
// left no result, writes JUnit and the HTML report, and returns errFailed if
// any run failed, proved nothing about a fault, or left no result.
func summarise(results []*reports.Result, missing []runKey, p summary, took time.Duration, stdout io.Writer) error {
	sort.Slice(results, func(i, j int) bool { return results[i].FileName() < results[j].FileName() })
	failed, unfired := 0, 0
	for _, r := range results {
		if r.Pass {
			continue
		}
		failed++
		fmt.Fprintf(stdout, "\nFAIL %s/%s/seed-%d\n", r.Scenario, r.Backend, r.Seed)
		for _, why := range r.Reasons {
			fmt.Fprintf(stdout, "  %s\n", why)
		}
		for _, note := range r.Notes {
			fmt.Fprintf(stdout, "  note: %s\n", note)
		}
		flags := p.flag
		if backends.UsesCluster(r.Backend) {
			flags += p.cluster
		}
		fmt.Fprintf(stdout, "  replay: converge replay %s%s\n  or:     %s\n", text.ShellQuote(filepath.Join(p.report, r.FileName())), flags, r.Replay)
	}
	for _, r := range results {
		if len(r.Unfired) > 0 {
			unfired++
			fmt.Fprintf(stdout, "\nnote: %s/%s/seed-%d proves nothing about what never fired: %s\n", r.Scenario, r.Backend, r.Seed, strings.Join(r.Unfired, ", "))
		}
	}
	skipped := 0
	for _, r := range results {
		if why := r.Skipped(); why != "" {
			skipped++
			fmt.Fprintf(stdout, "\nSKIPPED %s/%s/seed-%d: %s\n", r.Scenario, r.Backend, r.Seed, why)
		}
	}
	for _, n := range p.notRun {
		fmt.Fprintf(stdout, "\nSKIPPED %s/%s: %s\n", n.Scenario, n.Backend, n.Why)
	}
	for _, k := range missing {
		fmt.Fprintf(stdout, "\nNO RESULT %s: the run did not finish; see %s\n", k, filepath.Join(p.report, "scenarios.log"))
	}
	timeTable(results, stdout)
	var errs []error
	if p.junit != "" {
		if err := writeJUnit(p.junit, results, p.notRun); err != nil {
			errs = append(errs, fmt.Errorf("--junit: %w", err))
		}
	}
	index, htmlErr := reports.WriteHTML(p.report, results, "")
	in := ""
	if took > 0 {
		in = ", in " + took.Round(time.Millisecond).String()
	}
	notRun := ""
	if len(p.notRun) > 0 {
		notRun = fmt.Sprintf(" (and %d scenario on a backend it does not run on, skipped)", len(p.notRun))
		if len(p.notRun) > 1 {
			notRun = fmt.Sprintf(" (and %d scenarios on a backend they do not run on, skipped)", len(p.notRun))
		}
	}
	fmt.Fprintf(stdout, "\n%d runs, %d failed, %d with a fault or check that never fired, %d without a result, %d skipped%s%s\nresults: %s\n",
		len(results)+len(missing), failed, unfired, len(missing), skipped, notRun, in, p.report)
	if p.log {
		fmt.Fprintf(stdout, "logs:    %s\n", filepath.Join(p.report, "scenarios.log"))
	}
	if htmlErr != nil {
		fmt.Fprintf(stdout, "report:  %v\n", htmlErr)
		errs = append(errs, htmlErr)
	} else {
		fmt.Fprintf(stdout, "report:  %s\n", index)
	}
	if p.junit != "" {
		fmt.Fprintf(stdout, "junit:   %s\n", p.junit)
	}
	switch {
	case len(results) == 0:
		errs = append(errs, errors.New("no run produced a result"))
	case failed > 0 || unfired > 0 || len(missing) > 0:
		errs = append(errs, errFailed)
	}
	return errors.Join(errs...)
}

func writeJUnit(path string, results []*reports.Result, notRun []reports.NotRun) error {
	out, err := userfile.Create(path)
	if err != nil {
		return err
	}
	if err := reports.WriteJUnit(out, results, notRun...); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// exactlyOne accepts one positional argument, what the command takes.
func exactlyOne(command, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes %s, got %d arguments", command, what, len(args))}
		}
		return nil
	}
}

// testsOf refuses a result of a controller other than the scaler when
// the flags name no tests to run it with.
func (f runFlags) testsOf(file string, r *reports.Result) error {
	if r.Controller != "" && r.Controller != "scaler" && f.pkg == "" && f.testBinary == "" {
		return usageError{fmt.Errorf("%s is a run of controller %q: pass its tests with --package or --test-binary", file, r.Controller)}
	}
	return nil
}

// timeTable prints, per scenario and backend, its runs, how many failed
// and under which seeds (what a campaign found where), and the simulated
// and wall time of its runs and their ratio: on fake, how much faster than
// real time a scenario runs.
func timeTable(results []*reports.Result, stdout io.Writer) {
	type row struct {
		runs, failed    int
		seeds           []uint64
		simulated, wall time.Duration
	}
	rows := map[string]*row{}
	var keys []string
	for _, r := range results {
		k := r.Scenario + "/" + r.Backend
		if rows[k] == nil {
			rows[k] = &row{}
			keys = append(keys, k)
		}
		rows[k].runs++
		if !r.Pass {
			rows[k].failed++
			rows[k].seeds = append(rows[k].seeds, r.Seed)
		}
		if r.Error == "" && r.Wall > 0 {
			rows[k].simulated += time.Duration(r.Simulated)
			rows[k].wall += time.Duration(r.Wall)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	ratio := func(r *row) string {
		if r.wall <= 0 {
			return "-"
		}
		x := r.simulated.Seconds() / r.wall.Seconds()
		if x < 10 {
			return fmt.Sprintf("%.2gx", x)
		}
		return fmt.Sprintf("%.0fx", x)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "\nscenario/backend\truns\tfailed\tsimulated\twall\tsimulated/wall\t")
	var total row
	for _, k := range keys {
		r := rows[k]
		total.runs += r.runs
		total.failed += r.failed
		total.simulated += r.simulated
		total.wall += r.wall
		fmt.Fprintf(w, "%s\t%d\t%s\t%v\t%v\t%s\t\n", k, r.runs, failedSeeds(r.failed, r.seeds), r.simulated.Round(time.Millisecond), r.wall.Round(time.Millisecond), ratio(r))
	}
	fmt.Fprintf(w, "all\t%d\t%d\t%v\t%v\t%s\t\n", total.runs, total.failed, total.simulated.Round(time.Millisecond), total.wall.Round(time.Millisecond), ratio(&total))
	_ = w.Flush()
}

// failedSeeds is "0", or "2 (seeds 4, 17)", the first few seeds named.
func failedSeeds(n int, seeds []uint64) string {
	if n == 0 {
		return "0"
	}
	slices.Sort(seeds)
	var named []string
	for _, s := range seeds[:min(len(seeds), 5)] {
		named = append(named, strconv.FormatUint(s, 10))
	}
	more := ""
	if len(seeds) > 5 {
		more = ", ..."
	}
	return fmt.Sprintf("%d (seeds %s%s)", n, strings.Join(named, ", "), more)
}
