package main

import (
	"bufio"
	"context"
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
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim/cluster"
)

// errFailed: some run failed its verdict (exit 1); usage errors exit 2.
var errFailed = errors.New("some runs failed")

type usageError struct{ error }

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
			all, err := scenarios.Catalogue()
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
}

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
	cmd.Flags().StringVar(&f.seeds, "seeds", "1", `seeds: "N" runs seeds 1..N, "A-B" a range, "A,B,C" a list`)
	cmd.Flags().StringVar(&f.report, "report", "", "folder for the results (default: a new folder under the system's temp dir)")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write JUnit XML here")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster backend")
	cmd.Flags().StringVar(&f.testBinary, "test-binary", "", "the compiled scenario tests (default: converge-scenarios.test next to this binary, else built with go test -c)")
	return cmd
}

// seedList parses --seeds.
func seedList(s string) ([]uint64, error) {
	var out []uint64
	switch {
	case strings.Contains(s, ","):
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) == "" {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("--seeds %q: %w", s, err)
			}
			out = append(out, n)
		}
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, err1 := strconv.ParseUint(a, 10, 64)
		hi, err2 := strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil || hi < lo || hi-lo > 10_000 {
			return nil, fmt.Errorf("--seeds %q: want A-B with A <= B (at most 10000 seeds)", s)
		}
		for n := lo; n <= hi; n++ {
			out = append(out, n)
		}
	default:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 || n > 10_000 {
			return nil, fmt.Errorf("--seeds %q: want a count within 1..10000, a range A-B or a list A,B", s)
		}
		for i := uint64(1); i <= n; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// selection is what to run: catalogue names and scenario files.
type selection struct {
	names []string
	files []string
}

func selectScenarios(args []string) (selection, error) {
	var sel selection
	for _, a := range args {
		if strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml") {
			abs, err := filepath.Abs(a)
			if err != nil {
				return sel, err
			}
			if _, err := scenarios.Load(abs); err != nil {
				return sel, usageError{err}
			}
			sel.files = append(sel.files, abs)
			continue
		}
		if _, err := scenarios.Lookup(a); err != nil {
			return sel, usageError{err}
		}
		sel.names = append(sel.names, a)
	}
	return sel, nil
}

func runScenarios(ctx context.Context, f runFlags, args []string, stdout, stderr io.Writer) error {
	seeds, err := seedList(f.seeds)
	if err != nil {
		return usageError{err}
	}
	for _, b := range f.backends {
		if !slices.Contains([]string{scenarios.Fake, scenarios.Envtest, scenarios.Cluster}, b) {
			return usageError{fmt.Errorf("--backend %q: want fake, envtest or cluster", b)}
		}
	}
	sel, err := selectScenarios(args)
	if err != nil {
		return err
	}
	if f.report == "" {
		if f.report, err = os.MkdirTemp("", "converge-report-"); err != nil {
			return err
		}
	}
	if f.report, err = filepath.Abs(f.report); err != nil {
		return err
	}
	if err := os.MkdirAll(f.report, 0o755); err != nil {
		return err
	}
	began := time.Now()
	var compiled []string
	for _, b := range f.backends {
		if b != scenarios.Cluster {
			compiled = append(compiled, b)
		}
	}
	if len(compiled) > 0 {
		if err := runCompiled(ctx, f, sel, compiled, seeds, stdout, stderr); err != nil {
			return err
		}
	}
	if slices.Contains(f.backends, scenarios.Cluster) {
		if err := runCluster(ctx, f, sel, seeds, stdout); err != nil {
			return err
		}
	}
	results, err := reports.ReadDir(f.report)
	if err != nil {
		return err
	}
	return summarise(results, f, time.Since(began), stdout)
}

// runCompiled runs the fake and envtest runs through the compiled scenario
// tests, printing each run as it ends.
func runCompiled(ctx context.Context, f runFlags, sel selection, backends []string, seeds []uint64, stdout, stderr io.Writer) error {
	bin, err := testBinary(ctx, f.testBinary, stderr)
	if err != nil {
		return err
	}
	pattern := "^TestScenarios$"
	if chosen, err := resolve(sel); err == nil && (len(sel.names) > 0 || len(sel.files) > 0) {
		var quoted []string
		for _, s := range chosen {
			quoted = append(quoted, regexp.QuoteMeta(s.Name))
		}
		pattern += "/^(" + strings.Join(quoted, "|") + ")$"
	}
	done := 0
	for _, seed := range seeds {
		args := []string{"-test.run", pattern, "-test.v", "-test.count=1", "-test.timeout=60m",
			"-scenarios.seed=" + strconv.FormatUint(seed, 10), "-scenarios.seeds=1",
			"-scenarios.report=" + f.report, "-scenarios.backends=" + strings.Join(backends, ",")}
		if len(sel.files) > 0 {
			args = append(args, "-scenarios.files="+strings.Join(sel.files, ","))
		}
		if len(sel.names) > 0 {
			args = append(args, "-scenarios.names="+strings.Join(sel.names, ","))
		}
		// The controllers' logs go to a file beside the results.
		logFile, err := os.OpenFile(filepath.Join(f.report, "scenarios.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer logFile.Close()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = filepath.Dir(bin)
		cmd.Stderr = logFile
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("running %s: %w", bin, err)
		}
		done = progress(io.TeeReader(out, logFile), stdout, done)
		if err := cmd.Wait(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) || ctx.Err() != nil {
				return fmt.Errorf("running %s: %w", bin, err)
			}
			// A failed verdict fails its test; the results say which.
		}
	}
	return nil
}

var runLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestScenarios/([^/\s]+)/([^/\s]+)/(seed-\d+) \(([^)]*)\)`)

// progress prints one line per finished run from the test binary's -v
// output, numbered on from done, and returns the new count.
func progress(r io.Reader, stdout io.Writer, done int) int {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := done
	for sc.Scan() {
		line := sc.Text()
		if m := runLine.FindStringSubmatch(line); m != nil {
			n++
			fmt.Fprintf(stdout, "%4d  %-4s  %s/%s/%s  %s\n", n, m[1], m[2], m[3], m[4], m[5])
			continue
		}
		if strings.Contains(line, "SKIPPED (envtest)") {
			fmt.Fprintln(stdout, strings.TrimSpace(line))
		}
	}
	return n
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
func runCluster(ctx context.Context, f runFlags, sel selection, seeds []uint64, stdout io.Writer) error {
	if f.kubeconfig == "" {
		return usageError{errors.New("--backend cluster needs --kubeconfig")}
	}
	list, err := resolve(sel)
	if err != nil {
		return err
	}
	for _, s := range list {
		if !s.RunsOn(scenarios.Cluster) {
			continue
		}
		for _, seed := range seeds {
			b, err := cluster.New(cluster.Config{Kubeconfig: f.kubeconfig, NamespacePrefix: s.Name + "-"})
			if err != nil {
				return err
			}
			res := scenarios.Run(ctx, s, scenarios.Options{Backend: scenarios.Cluster, Seed: seed, SimBackend: b,
				Replay: fmt.Sprintf("converge run %s --backend cluster --kubeconfig %s --seeds %d,", s.Name, f.kubeconfig, seed)})
			if _, err := reports.Write(f.report, res); err != nil {
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

func resolve(sel selection) ([]*scenarios.Scenario, error) {
	if len(sel.names) == 0 && len(sel.files) == 0 {
		return scenarios.Catalogue()
	}
	var out []*scenarios.Scenario
	for _, n := range sel.names {
		s, err := scenarios.Lookup(n)
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

// summarise prints the failures with their replay commands, writes JUnit,
// and returns errFailed if any run failed.
func summarise(results []*reports.Result, f runFlags, took time.Duration, stdout io.Writer) error {
	sort.Slice(results, func(i, j int) bool { return results[i].FileName() < results[j].FileName() })
	failed := 0
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
		fmt.Fprintf(stdout, "  replay: %s\n  or:     converge replay %s\n", r.Replay, filepath.Join(f.report, r.FileName()))
	}
	for _, r := range results {
		if len(r.Unfired) > 0 {
			fmt.Fprintf(stdout, "\nnote: %s/%s/seed-%d proves nothing about what never fired: %s\n", r.Scenario, r.Backend, r.Seed, strings.Join(r.Unfired, ", "))
		}
	}
	timeTable(results, stdout)
	if f.junit != "" {
		out, err := os.Create(f.junit)
		if err != nil {
			return err
		}
		if err := reports.WriteJUnit(out, results); err != nil {
			_ = out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	index, htmlErr := reports.WriteHTML(f.report, results, "")
	fmt.Fprintf(stdout, "\n%d runs, %d failed, in %v\nresults: %s\nlogs:    %s\n", len(results), failed, took.Round(time.Millisecond), f.report, filepath.Join(f.report, "scenarios.log"))
	if htmlErr != nil {
		fmt.Fprintf(stdout, "report:  %v\n", htmlErr)
	} else {
		fmt.Fprintf(stdout, "report:  %s\n", index)
	}
	if f.junit != "" {
		fmt.Fprintf(stdout, "junit:   %s\n", f.junit)
	}
	if failed > 0 {
		return errFailed
	}
	if len(results) == 0 {
		return errors.New("no run produced a result")
	}
	return nil
}

// replayCommand runs a result's scenario again with its backend and seed
// and says whether the verdict and the fault schedule came out the same.
func replayCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var file, testBin string
	cmd := &cobra.Command{
		Use:   "replay RESULT.json",
		Short: "Run a result's scenario again with the same backend and seed, and compare",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := reports.Read(args[0])
			if err != nil {
				return usageError{err}
			}
			var sel selection
			if file != "" {
				if sel, err = selectScenarios([]string{file}); err != nil {
					return err
				}
			} else if _, err := scenarios.Lookup(old.Scenario); err != nil {
				return usageError{fmt.Errorf("%w; pass its file with --file", err)}
			} else {
				sel.names = []string{old.Scenario}
			}
			dir, err := os.MkdirTemp("", "converge-replay-")
			if err != nil {
				return err
			}
			f := runFlags{backends: []string{old.Backend}, seeds: strconv.FormatUint(old.Seed, 10) + ",", report: dir, testBinary: testBin}
			if old.Backend == scenarios.Cluster {
				return usageError{errors.New("replay a cluster run with converge run --backend cluster")}
			}
			if err := runCompiled(ctx, f, sel, f.backends, []uint64{old.Seed}, stdout, stderr); err != nil {
				return err
			}
			var again *reports.Result
			results, err := reports.ReadDir(dir)
			for _, r := range results {
				if r.Scenario == old.Scenario {
					again = r
				}
			}
			if again == nil {
				return fmt.Errorf("the replay produced no result: %v", err)
			}
			fmt.Fprintf(stdout, "before: pass=%v %s\nreplay: pass=%v %s\n", old.Pass, strings.Join(old.Reasons, "; "), again.Pass, strings.Join(again.Reasons, "; "))
			same := sameFaults(old, again)
			fmt.Fprintf(stdout, "fault schedule: %s\nresult: %s\n", same, filepath.Join(dir, again.FileName()))
			if !again.Pass {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the scenario file, when it is not in the catalogue")
	cmd.Flags().StringVar(&testBin, "test-binary", "", "the compiled scenario tests")
	return cmd
}

func sameFaults(a, b *reports.Result) string {
	fa, fb := a.History.Faults, b.History.Faults
	if len(fa) != len(fb) {
		return fmt.Sprintf("differs: %d firings, then %d", len(fa), len(fb))
	}
	for i := range fa {
		if fa[i].Fault != fb[i].Fault || fa[i].Request != fb[i].Request || fa[i].At.Sub(a.Started).Round(time.Millisecond) != fb[i].At.Sub(b.Started).Round(time.Millisecond) {
			return fmt.Sprintf("differs at firing %d: %s %s, then %s %s", i+1, fa[i].Fault, fa[i].Request, fb[i].Fault, fb[i].Request)
		}
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
