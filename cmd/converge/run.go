package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/cluster"
)

// errFailed: some run failed its verdict (exit 1); usage errors exit 2.
var errFailed = errors.New("some runs failed")

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// Run is the whole CLI.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Run chaos scenarios against a Kubernetes controller and judge whether the world converges",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(listCommand(stdout), runCommand(ctx, stdout, stderr), replayCommand(ctx, stdout, stderr), reportCommand(stdout))
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		return usageError{err}
	}
	return err
}

func listCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the catalogue's scenarios",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			all, err := scaler.Catalogue()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKENDS\tFAULTS\tCATCHES")
			for _, s := range all {
				var faults []string
				for _, f := range s.Faults {
					faults = append(faults, f.Fault)
				}
				backends := s.Backends
				if len(backends) == 0 {
					backends = []string{scenarios.Fake, scenarios.Envtest}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, strings.Join(backends, ","), orDash(strings.Join(slices.Compact(faults), ",")), oneLine(s.Catches, 70))
			}
			return tw.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

type runFlags struct {
	backends   []string
	seeds      string
	report     string
	junit      string
	kubeconfig string
	testBinary string
	runTimeout time.Duration
}

// defaultRunTimeout is the wall-clock limit of one run unless --run-timeout
// says otherwise: a run on fake takes seconds, one on envtest minutes.
const defaultRunTimeout = 15 * time.Minute

func runCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [SCENARIO | FILE.yaml ...]",
		Short: "Run scenarios (all of the catalogue by default) on backends with seeds",
		RunE: func(_ *cobra.Command, args []string) error {
			return runScenarios(ctx, f, args, stdout, stderr)
		},
	}
	cmd.Flags().StringSliceVar(&f.backends, "backend", []string{scenarios.Fake}, "backends: fake, envtest, cluster (comma-separated or repeated)")
	cmd.Flags().StringVar(&f.seeds, "seeds", "1", `seeds: "7" runs seed 7, "1-20" a range, "3,9,12" a list (at most 10000)`)
	cmd.Flags().StringVar(&f.report, "report", "", "folder for the results (default: a new folder under the system's temp dir); other files in it are left alone")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write JUnit XML here")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster backend")
	cmd.Flags().StringVar(&f.testBinary, "test-binary", "", "the compiled scenario tests (default: converge-scenarios.test next to this binary, else built with go test -c)")
	cmd.Flags().DurationVar(&f.runTimeout, "run-timeout", defaultRunTimeout, "wall-clock limit of one run; a run that passes it ends as an error")
	return cmd
}

// plan is one invocation of run: its flags checked, what it runs, and the
// ID its results carry.
type plan struct {
	runFlags
	seedList []uint64
	sel      selection
	list     []*scenarios.Scenario
	runID    string
}

// check validates every flag before any run starts, so a mistake costs
// nothing.
func (f runFlags) check(args []string) (*plan, error) {
	p := &plan{runFlags: f}
	var errs []error
	seeds, err := seedList(f.seeds)
	if err != nil {
		errs = append(errs, err)
	}
	p.seedList = seeds
	if len(f.backends) == 0 {
		errs = append(errs, errors.New("--backend: name at least one of fake, envtest, cluster"))
	}
	for _, b := range f.backends {
		if !slices.Contains([]string{scenarios.Fake, scenarios.Envtest, scenarios.Cluster}, b) {
			errs = append(errs, fmt.Errorf("--backend %q: want fake, envtest or cluster", b))
		}
	}
	if slices.Contains(f.backends, scenarios.Cluster) {
		if f.kubeconfig == "" {
			errs = append(errs, errors.New("--backend cluster needs --kubeconfig"))
		} else if _, err := os.Stat(f.kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if f.runTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--run-timeout must be positive, got %v", f.runTimeout))
	}
	if f.testBinary != "" {
		if st, err := os.Stat(f.testBinary); err != nil {
			errs = append(errs, fmt.Errorf("--test-binary: %w", err))
		} else if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("--test-binary %s: not an executable file", f.testBinary))
		}
	}
	if len(errs) > 0 {
		return nil, usageError{errors.Join(errs...)}
	}
	if p.sel, err = selectScenarios(args); err != nil {
		return nil, err
	}
	if p.list, err = resolve(p.sel); err != nil {
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
		out, err := os.OpenFile(p.junit, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return nil, usageError{fmt.Errorf("--junit: %w", err)}
		}
		_ = out.Close()
	}
	if len(p.expected()) == 0 {
		var on []string
		for _, s := range p.list {
			on = append(on, fmt.Sprintf("%s runs on %s", s.Name, strings.Join(s.RunsOnBackends(), ",")))
		}
		return nil, usageError{fmt.Errorf("nothing to run on --backend %s: %s", strings.Join(p.backends, ","), strings.Join(on, "; "))}
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	p.runID = hex.EncodeToString(id)
	return p, nil
}

// selection is what to run: catalogue names and scenario files.
type selection struct {
	names []string
	files []string
}

// selectScenarios checks the arguments: each a catalogue name or a
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
			if _, err := scaler.Lookup(a); err != nil {
				return sel, usageError{err}
			}
			sel.names = append(sel.names, a)
			name, what = a, "the catalogue"
		}
		if other, dup := from[name]; dup {
			return sel, usageError{fmt.Errorf("two scenarios named %q (%s and %s): their results would overwrite each other; rename one", name, other, what)}
		}
		from[name] = what
	}
	return sel, nil
}

func runScenarios(ctx context.Context, f runFlags, args []string, stdout, stderr io.Writer) error {
	p, err := f.check(args)
	if err != nil {
		return err
	}
	began := time.Now()
	var compiled []string
	for _, b := range p.backends {
		if b != scenarios.Cluster {
			compiled = append(compiled, b)
		}
	}
	var runErr error
	if len(compiled) > 0 {
		runErr = runCompiled(ctx, p, compiled, stdout, stderr)
	}
	if runErr == nil && slices.Contains(p.backends, scenarios.Cluster) {
		runErr = runCluster(ctx, p, stdout)
	}
	if runErr != nil && ctx.Err() == nil && !errors.As(runErr, new(*childError)) {
		return runErr
	}
	results, missing := p.collect()
	if len(missing) == 0 && errors.As(runErr, new(*childError)) {
		// The tests' process exits 1 when a verdict fails; every run it
		// owed left its result, which says why.
		runErr = nil
	}
	err = summarise(results, missing, p, time.Since(began), stdout)
	return errors.Join(runErr, err)
}

// runKey is one run the invocation asked for.
type runKey struct {
	scenario, backend string
	seed              uint64
}

func (k runKey) String() string { return fmt.Sprintf("%s/%s/seed-%d", k.scenario, k.backend, k.seed) }

// expected lists the runs the invocation asked for.
func (p *plan) expected() []runKey {
	var out []runKey
	for _, s := range p.list {
		for _, b := range p.backends {
			if !s.RunsOn(b) {
				continue
			}
			for _, seed := range p.seedList {
				out = append(out, runKey{s.Name, b, seed})
			}
		}
	}
	return out
}

// collect reads the results of this invocation: for each run it asked for,
// the result file of that name carrying this invocation's ID. Nothing else
// in the folder is read. It returns the runs that left no such result.
func (p *plan) collect() ([]*reports.Result, []runKey) {
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
	for _, k := range p.expected() {
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
	bin    string
	err    error
	output []string
}

func (e *childError) Error() string {
	msg := fmt.Sprintf("the scenario tests (%s) failed: %v", e.bin, e.err)
	if len(e.output) > 0 {
		msg += "; their last output:\n  " + strings.Join(e.output, "\n  ")
	}
	return msg
}

// runCompiled runs the fake and envtest runs through the compiled scenario
// tests, printing each run as it ends.
func runCompiled(ctx context.Context, p *plan, backends []string, stdout, stderr io.Writer) error {
	bin, err := testBinary(ctx, p.testBinary, stderr)
	if err != nil {
		return err
	}
	pattern := "^TestScenarios$"
	if len(p.sel.names) > 0 || len(p.sel.files) > 0 {
		var quoted []string
		for _, s := range p.list {
			quoted = append(quoted, regexp.QuoteMeta(s.Name))
		}
		pattern += "/^(" + strings.Join(quoted, "|") + ")$"
	}
	// The controllers' logs go to a file beside the results.
	logFile, err := os.OpenFile(filepath.Join(p.report, "scenarios.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	done := 0
	var childErrs []error
	// Each run has its own limit; the process's is a backstop for a hang
	// outside any run.
	timeout := p.runTimeout*time.Duration(len(p.list)*len(backends)) + 10*time.Minute
	for _, seed := range p.seedList {
		args := []string{"-test.run", pattern, "-test.v", "-test.count=1", "-test.timeout=" + timeout.String(),
			"-scenarios.seed=" + strconv.FormatUint(seed, 10), "-scenarios.seeds=1",
			"-scenarios.report=" + p.report, "-scenarios.backends=" + strings.Join(backends, ","),
			"-scenarios.run-id=" + p.runID, "-scenarios.run-timeout=" + p.runTimeout.String()}
		for _, file := range p.sel.files {
			args = append(args, "-scenarios.file="+file)
		}
		if len(p.sel.names) > 0 {
			args = append(args, "-scenarios.names="+strings.Join(p.sel.names, ","))
		}
		tail := &tailWriter{max: 20}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = filepath.Dir(bin)
		cmd.Stderr = io.MultiWriter(logFile, tail)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return &childError{bin: bin, err: err}
		}
		done = progress(io.TeeReader(out, io.MultiWriter(logFile, tail)), stdout, done)
		if err := cmd.Wait(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: %w", ctx.Err())
			}
			// A failed verdict fails its test, and the results say which;
			// anything else is the process's own failure, told with its
			// output if no result explains it.
			childErrs = append(childErrs, &childError{bin: bin, err: err, output: tail.lines})
		}
	}
	if len(childErrs) > 0 {
		return childErrs[len(childErrs)-1]
	}
	return nil
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

var runLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestScenarios/([^/\s]+)/([^/\s]+)/(seed-\d+) \(([^)]*)\)`)

// maxLine is how much of one output line progress looks at; the rest of a
// longer line is read and dropped, so the child never blocks on a full pipe.
const maxLine = 64 << 10

// progress prints one line per finished run from the test binary's -v
// output, numbered on from done, and returns the new count. It reads r to
// its end whatever it holds.
func progress(r io.Reader, stdout io.Writer, done int) int {
	br := bufio.NewReaderSize(r, maxLine)
	n := done
	for {
		line, err := readLine(br)
		if m := runLine.FindStringSubmatch(line); m != nil {
			n++
			fmt.Fprintf(stdout, "%4d  %-4s  %s/%s/%s  %s\n", n, m[1], m[2], m[3], m[4], m[5])
		} else if strings.Contains(line, "SKIPPED (envtest)") {
			fmt.Fprintln(stdout, strings.TrimSpace(line))
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return n
		}
	}
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

// testBinary finds or builds the compiled scenario tests.
func testBinary(ctx context.Context, flag string, stderr io.Writer) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("CONVERGE_SCENARIOS_TEST"); env != "" {
		return env, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "converge-scenarios.test")
		if _, err := os.Stat(next); err == nil {
			return next, nil
		}
	}
	// Inside the source tree: build it.
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("no compiled scenario tests: build them with `make build` (bin/converge-scenarios.test) or pass --test-binary: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "converge", "converge-scenarios.test")
	fmt.Fprintln(stderr, "building the scenario tests into", out)
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, "./scenarios")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the scenario tests: %w", err)
	}
	return out, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/converge-lab/converge\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the converge source tree")
		}
		dir = parent
	}
}

// runCluster runs on a real cluster in this process, in real time.
func runCluster(ctx context.Context, p *plan, stdout io.Writer) error {
	for i, s := range p.list {
		arg := s.Name
		if j := i - len(p.sel.names); len(p.sel.files) > 0 && j >= 0 {
			arg = p.sel.files[j] // resolve lists the files after the names
		}
		if !s.RunsOn(scenarios.Cluster) {
			continue
		}
		for _, seed := range p.seedList {
			c := scaler.For(s)
			b, err := cluster.New(cluster.Config{Kubeconfig: p.kubeconfig, NamespacePrefix: s.Name + "-", Controller: scenarios.IdentityOf(c)})
			if err != nil {
				return err
			}
			limit, stop := scenarios.WallClockLimit(p.runTimeout)
			res := scenarios.Run(ctx, s, scenarios.Options{Backend: scenarios.Cluster, Seed: seed, SimBackend: b, Controller: c, RunID: p.runID, Limit: limit,
				Replay: fmt.Sprintf("converge run %s --backend cluster --kubeconfig %s --seeds %d", shellQuote(arg), shellQuote(p.kubeconfig), seed)})
			stop()
			if _, err := reports.Write(p.report, res); err != nil {
				return err
			}
			verdict := "PASS"
			if !res.Pass {
				verdict = "FAIL"
			}
			fmt.Fprintf(stdout, "      %-4s  %s/cluster/seed-%d  %v\n", verdict, s.Name, seed, time.Duration(res.Wall).Round(time.Millisecond))
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func resolve(sel selection) ([]*scenarios.Scenario, error) {
	if len(sel.names) == 0 && len(sel.files) == 0 {
		return scaler.Catalogue()
	}
	var out []*scenarios.Scenario
	for _, n := range sel.names {
		s, err := scaler.Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	for _, p := range sel.files {
		s, err := scenarios.Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// summarise prints the failures with their replay commands, the runs that
// left no result, writes JUnit and the HTML report, and returns errFailed if
// any run failed, proved nothing about a fault, or left no result.
func summarise(results []*reports.Result, missing []runKey, p *plan, took time.Duration, stdout io.Writer) error {
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
		fmt.Fprintf(stdout, "  replay: converge replay %s\n  or:     %s\n", shellQuote(filepath.Join(p.report, r.FileName())), r.Replay)
	}
	for _, r := range results {
		if len(r.Unfired) > 0 {
			unfired++
			fmt.Fprintf(stdout, "\nnote: %s/%s/seed-%d proves nothing about what never fired: %s\n", r.Scenario, r.Backend, r.Seed, strings.Join(r.Unfired, ", "))
		}
	}
	for _, k := range missing {
		fmt.Fprintf(stdout, "\nNO RESULT %s: the run did not finish; see %s\n", k, filepath.Join(p.report, "scenarios.log"))
	}
	timeTable(results, stdout)
	var errs []error
	if p.junit != "" {
		if err := writeJUnit(p.junit, results); err != nil {
			errs = append(errs, fmt.Errorf("--junit: %w", err))
		}
	}
	index, htmlErr := reports.WriteHTML(p.report, results, "")
	fmt.Fprintf(stdout, "\n%d runs, %d failed, %d with faults that never fired, %d without a result, in %v\nresults: %s\nlogs:    %s\n",
		len(results)+len(missing), failed, unfired, len(missing), took.Round(time.Millisecond), p.report, filepath.Join(p.report, "scenarios.log"))
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

func writeJUnit(path string, results []*reports.Result) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := reports.WriteJUnit(out, results); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// replayCommand runs a result's scenario again with its backend and seed
// and says whether the verdict and the fault schedule came out the same.
func replayCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var file, testBin string
	var runTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "replay RESULT.json",
		Short: "Run a result's scenario again with the same backend and seed, and compare",
		Long: `Run a result's scenario again with the same backend and seed, and compare the
verdict and the fault schedule. The result holds the scenario it ran, so no
catalogue or file is needed; --file replays an older result that does not.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("replay takes one result file, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := reports.Read(args[0])
			if err != nil {
				return usageError{err}
			}
			if old.Backend == scenarios.Cluster {
				return usageError{errors.New("replay a cluster run with converge run --backend cluster")}
			}
			dir, err := os.MkdirTemp("", "converge-replay-")
			if err != nil {
				return err
			}
			var scenarioArg string
			switch {
			case file != "":
				scenarioArg = file
			case len(old.Spec) > 0:
				// The scenario as it ran, whatever the catalogue holds now.
				scenarioArg = filepath.Join(dir, "scenario.yaml")
				if err := os.WriteFile(scenarioArg, old.Spec, 0o644); err != nil {
					return err
				}
			default:
				if _, err := scaler.Lookup(old.Scenario); err != nil {
					return usageError{fmt.Errorf("%s holds no scenario and %w; pass its file with --file", args[0], err)}
				}
				scenarioArg = old.Scenario
			}
			f := runFlags{backends: []string{old.Backend}, seeds: strconv.FormatUint(old.Seed, 10), report: filepath.Join(dir, "results"), testBinary: testBin, runTimeout: runTimeout}
			p, err := f.check([]string{scenarioArg})
			if err != nil {
				return err
			}
			if p.list[0].Name != old.Scenario {
				return usageError{fmt.Errorf("%s is scenario %q, the result is of %q", scenarioArg, p.list[0].Name, old.Scenario)}
			}
			runErr := runCompiled(ctx, p, p.backends, stdout, stderr)
			results, _ := p.collect()
			if len(results) == 0 {
				return errors.Join(errors.New("the replay produced no result"), runErr)
			}
			again := results[0]
			fmt.Fprintf(stdout, "before: pass=%v %s\nreplay: pass=%v %s\n", old.Pass, strings.Join(old.Reasons, "; "), again.Pass, strings.Join(again.Reasons, "; "))
			same := sameFaults(old, again)
			fmt.Fprintf(stdout, "fault schedule: %s\nresult: %s\n", same, filepath.Join(p.report, again.FileName()))
			if !again.Pass {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the scenario file, for a result that does not hold its scenario")
	cmd.Flags().StringVar(&testBin, "test-binary", "", "the compiled scenario tests")
	cmd.Flags().DurationVar(&runTimeout, "run-timeout", defaultRunTimeout, "wall-clock limit of the run")
	return cmd
}

// sameFaults compares two runs' firings as multisets per instant (to the
// millisecond): firings at one instant have no order of their own.
func sameFaults(a, b *reports.Result) string {
	type firing struct {
		at             time.Duration
		fault, request string
	}
	key := func(r *reports.Result) []firing {
		out := make([]firing, 0, len(r.History.Faults))
		for _, f := range r.History.Faults {
			out = append(out, firing{f.At.Sub(r.Started).Round(time.Millisecond), f.Fault, f.Request})
		}
		slices.SortFunc(out, func(x, y firing) int {
			return cmp.Or(cmp.Compare(x.at, y.at), strings.Compare(x.fault, y.fault), strings.Compare(x.request, y.request))
		})
		return out
	}
	fa, fb := key(a), key(b)
	for i := range min(len(fa), len(fb)) {
		if fa[i] != fb[i] {
			return fmt.Sprintf("differs from firing %d: %s %s at %v, then %s %s at %v", i+1, fa[i].fault, fa[i].request, fa[i].at, fb[i].fault, fb[i].request, fb[i].at)
		}
	}
	if len(fa) != len(fb) {
		return fmt.Sprintf("differs: %d firings, then %d", len(fa), len(fb))
	}
	return fmt.Sprintf("the same %d firings at the same instants", len(fa))
}

// timeTable prints, per scenario and backend, the simulated and wall time
// of its runs and their ratio: on fake, how much faster than real time a
// scenario runs.
func timeTable(results []*reports.Result, stdout io.Writer) {
	type row struct {
		runs            int
		simulated, wall time.Duration
	}
	rows := map[string]*row{}
	var keys []string
	for _, r := range results {
		if r.Error != "" || r.Wall <= 0 {
			continue
		}
		k := r.Scenario + "/" + r.Backend
		if rows[k] == nil {
			rows[k] = &row{}
			keys = append(keys, k)
		}
		rows[k].runs++
		rows[k].simulated += time.Duration(r.Simulated)
		rows[k].wall += time.Duration(r.Wall)
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "\nscenario/backend\truns\tsimulated\twall\tsimulated/wall\t")
	var total row
	for _, k := range keys {
		r := rows[k]
		total.runs += r.runs
		total.simulated += r.simulated
		total.wall += r.wall
		fmt.Fprintf(w, "%s\t%d\t%v\t%v\t%.0fx\t\n", k, r.runs, r.simulated.Round(time.Millisecond), r.wall.Round(time.Millisecond), r.simulated.Seconds()/r.wall.Seconds())
	}
	fmt.Fprintf(w, "all\t%d\t%v\t%v\t%.0fx\t\n", total.runs, total.simulated.Round(time.Millisecond), total.wall.Round(time.Millisecond), total.simulated.Seconds()/total.wall.Seconds())
	_ = w.Flush()
}
