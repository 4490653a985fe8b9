package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/sim/fake"
)

// exploreFlags are converge explore's flags.
type exploreFlags struct {
	runFlags
	seed          uint64
	withoutFaults bool
	inputs        bool
}

func exploreCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore SCENARIO|FILE.yaml",
		Short: "Find bugs no scenario was written for: one fault at each point of a fault-free run, judged by difference",
		Long: `Explore a fault-free scenario on the fake backend. It runs the scenario
without faults several times (the reference), lists the points of the first
reference run where one fault can strike (a crash or SIGTERM right after each
write, a restart right after each write against a view from before it, a 409
on each write, 5xx on each kind of request, a lost or held-back
watch event, a 410 on each watch, a tombstone for each deletion and a restart
after it against a view that still holds the deleted object), prunes
repeats and no-ops, runs each point as a run of its own in virtual time,
spread over --parallel processes, and judges each by the scenario's verdict
and by how its end state and its objects' additions and deletions differ from
the references'. Findings are grouped by what differed, each with its
smallest point and the command that replays it; the report folder holds the
HTML report, every run's result, and exploration.json.

With --inputs it explores the scenario's inputs instead of faults: from
each custom resource the scenario creates and its CRD's schema, the changes
the schema allows to its spec (bounds, zero, one more and one less, other
enum values, flipped booleans, optional fields removed and added, list items
added, removed and reordered, map keys added and removed), each made once
the references converged, and as many chains of two or three of them, made
one after another. Each point is one run: the resource created with the
changes, then changed back as the references ended it, then changed again
(with one change the schema refuses sent among them, which the server must
refuse), each step once the controller had gone quiet after the one before.
A correct controller ends the run as it stood before the changes back, on
the objects it writes; stands before the changes as the references ended;
and passes. When it had not gone quiet before a step, the three are run
apart. The scenario's own goal, written for its input, is not judged. A failing
point is shrunk to the fewest changes, and the numbers closest to the ones
they replaced, that still fail. The scenario's inputs section pins,
excludes or adds values by path; fields its own interference writes are
left out.

A scenario with faults of its own is refused; --without-faults explores its
world without them. Exit status: 0 without findings, 1 with some, 2 on bad
usage.`,
		Args: exactlyOne("explore", "one scenario (a name or a file)"),
		RunE: func(_ *cobra.Command, args []string) error { return exploreScenario(ctx, f, args[0], stdout, stderr) },
	}
	f.testFlags(cmd)
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "the seed of the first reference run and of every point's run")
	cmd.Flags().IntVar(&f.parallel, "parallel", runtime.NumCPU(), "processes that run points side by side")
	cmd.Flags().BoolVar(&f.withoutFaults, "without-faults", false, "explore the world of a scenario that has faults, without them")
	cmd.Flags().BoolVar(&f.inputs, "inputs", false, "explore the changes of its custom resources their CRDs allow, instead of faults")
	cmd.Flags().StringVar(&f.report, "report", "", "folder for the results and the report (default: a new temporary folder)")
	cmd.Flags().DurationVar(&f.runTimeout, "run-timeout", defaultRunTimeout, "wall-clock limit of each run")
	return cmd
}

func exploreScenario(ctx context.Context, f exploreFlags, arg string, stdout, stderr io.Writer) error {
	f.backends, f.seeds = []string{fake.Name}, strconv.FormatUint(f.seed, 10)
	p, err := f.check(ctx, []string{arg}, stderr)
	if err != nil {
		return err
	}
	l := p.listed()[0]
	began := time.Now()
	base := []string{"-test.run", "^" + regexp.QuoteMeta(strings.Split(l.Test, "/")[0]) + "$", "-test.count=1", "-test.timeout=0"}
	inv := p.tests.invocation()
	inv.Explore, inv.Seed, inv.Report, inv.RunTimeout, inv.RunID = l.Name, f.seed, p.report, f.runTimeout, p.runID
	inv.Files, inv.ExploreWithoutFaults, inv.ExploreInputs = p.sel.files, f.withoutFaults, f.inputs
	planFile := filepath.Join(p.report, "plan.json")
	inv.ExplorePlan = planFile
	fmt.Fprintf(stdout, "exploring %s: reference runs\n", l.Name)
	// The points' processes start beside the reference runs, so that
	// their start costs no wall time: each waits on its standard input
	// for its shard, and runs nothing when none comes.
	shards := startShards(ctx, l.Name, p.tests, base, inv, f.parallel, p.report, stderr)
	// The reference runs' process and the points' run side by side.
	if err := runTests(ctx, "the reference runs of "+l.Name, p.tests, base, inv, nil, f.parallel+1, p.report, stderr); err != nil {
		return errors.Join(err, shards.wait())
	}
	var refs []explore.Outcome
	if err := readJSON(filepath.Join(p.report, "outcomes-references.json"), &refs); err != nil {
		return errors.Join(err, shards.wait())
	}
	failing := false
	for _, o := range refs {
		failing = failing || len(o.Differences) > 0 || o.Error != ""
	}
	var outcomes []explore.Outcome
	var pointsTook time.Duration // from sending the shards to their end
	// The runs whose pages the points' processes wrote, summarised, by
	// result file.
	summaries := map[string]*reports.Result{}
	pointsBegan := time.Now()
	if !failing {
		// Every process takes the points through the claims, so they start
		// before the plan is read here: one that finds none ends.
		shards.send(f.parallel)
	}
	plan, err := explore.ReadPlan(planFile)
	if err != nil {
		return errors.Join(err, shards.wait())
	}
	if failing {
		if err := shards.wait(); err != nil {
			return err
		}
	} else {
		ids := make([]string, 0, len(plan.Points))
		for _, pt := range plan.Points {
			ids = append(ids, pt.ID)
		}
		what := "points"
		if f.inputs {
			ids, what = ids[:0], "input points (one change or a chain of two or three; one run each: the resource created with the changes, changed back, then changed again, read before each step (the three runs apart when the controller had not gone quiet by one); a failing one shrunk)"
			for _, pt := range plan.Inputs {
				ids = append(ids, pt.ID)
			}
		}
		fmt.Fprintf(stdout, "%d %s in %d processes\n", len(ids), what, min(f.parallel, max(len(ids), 1)))
		if err := shards.wait(); err != nil {
			return err
		}
		pointsTook = time.Since(pointsBegan)
		byID := map[string]explore.Outcome{}
		for i := range f.parallel {
			var part []explore.Outcome
			if err := readJSON(filepath.Join(p.report, fmt.Sprintf("outcomes-%d.json", i)), &part); err != nil {
				return err
			}
			for _, o := range part {
				byID[o.Point.ID] = o
			}
			// The runs whose pages the process wrote, summarised: the
			// report reads none of their files. Without them (a process
			// of an older converge), it reads them.
			if part, err := reports.ReadSummaries(filepath.Join(p.report, summariesFile(i))); err == nil {
				for _, r := range part {
					summaries[r.FileName()] = r
				}
			}
		}
		// The references' pages, written by the points' processes.
		for i, o := range refs {
			refs[i].Page = summaries[o.Result] != nil
		}
		for _, id := range ids {
			if o, ok := byID[id]; ok {
				outcomes = append(outcomes, o)
			}
		}
	}
	controller := ""
	if len(plan.References) > 0 {
		controller = plan.References[0].Controller
	}
	// Replays through this command line's tests, not go test's.
	for i, o := range outcomes {
		if o.File != "" {
			outcomes[i].Replay = fmt.Sprintf("converge run %s --backend fake --seeds %d%s", text.ShellQuote(o.File), f.seed, p.tests.flag)
		}
	}
	e := plan.Summarise(controller, refs, outcomes, time.Since(began))
	if err := e.Write(filepath.Join(p.report, "exploration.json")); err != nil {
		return err
	}
	index, err := explore.WriteReportFrom(p.report, e, summaries)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, e.Text())
	fmt.Fprintln(stdout, pace(e.Coverage.Run, time.Since(began), pointsTook))
	fmt.Fprintf(stdout, "report: %s\n", index)
	if len(e.Findings) > 0 {
		return errFailed
	}
	return nil
}

// shardProcesses are the processes that run an exploration's points,
// started before its plan is written, each waiting for its shard.
type shardProcesses struct {
	feeds []*os.File // the write end of each one's standard input
	errs  []error
	wg    sync.WaitGroup
	// claims is the folder through which they share the points.
	claims string
}

// startShards starts parallel processes of the tests with args that run
// shards of the points of the plan inv names, each told its shard by
// wait.
func startShards(ctx context.Context, name string, t *tests, args []string, inv invocation.Invocation, parallel int, report string, stderr io.Writer) *shardProcesses {
	s := &shardProcesses{errs: make([]error, parallel), claims: filepath.Join(report, "claims")}
	inv.ExploreShard, inv.ExploreClaims = invocation.ShardFromStdin, s.claims
	// A folder of an earlier exploration's claims would take its points,
	// and its summaries would stand for runs of this one.
	if err := os.RemoveAll(s.claims); err != nil {
		s.errs[0] = err
		return s
	}
	for i := range parallel {
		if err := os.Remove(filepath.Join(report, summariesFile(i))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.errs[0] = err
			return s
		}
	}
	for i := range parallel {
		r, w, err := os.Pipe()
		if err != nil {
			s.errs[i] = err
			continue
		}
		s.feeds = append(s.feeds, w)
		s.wg.Go(func() {
			defer r.Close()
			s.errs[i] = runTests(ctx, fmt.Sprintf("the points of %s, process %d", name, i+1), t, args, inv, r, parallel+1, report, stderr)
		})
	}
	return s
}

// summariesFile is the file of points' process i's summaries of the runs
// whose pages it wrote (reports.WriteSummaries).
func summariesFile(i int) string { return fmt.Sprintf("summaries-%d.json", i) }

// send gives the first n processes shard i of n each (they share the
// points through the claims folder), and the others none: they end.
// Only the first call sends.
func (s *shardProcesses) send(n int) {
	for i, w := range s.feeds {
		if i < n {
			// A process that has ended cannot take it: its exit says why,
			// and its outcomes are missing.
			_, _ = fmt.Fprintf(w, "%d/%d\n", i, n)
		}
		w.Close()
	}
	s.feeds = nil
}

// wait waits for every process, those send gave no shard (or that it was
// not called for) running none.
func (s *shardProcesses) wait() error {
	s.send(0)
	s.wg.Wait()
	return errors.Join(append(s.errs, os.RemoveAll(s.claims))...)
}

// runTests runs the compiled tests with args, doing what, their output
// into the report folder's log; a failure says why with the output's
// tail. stdin, when not nil, is their standard input; beside is how many
// such processes run side by side (for childEnv).
func runTests(ctx context.Context, what string, t *tests, args []string, inv invocation.Invocation, stdin *os.File, beside int, report string, stderr io.Writer) error {
	logFile, err := os.OpenFile(filepath.Join(report, "scenarios.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	tail := &tailWriter{max: 20}
	cmd := newChild(ctx, what, t.bin, args...)
	cmd.Dir = t.dir
	cmd.Env = withInvocation(childEnv(os.Environ(), beside), inv)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout = io.MultiWriter(logFile, tail)
	cmd.Stderr = io.MultiWriter(logFile, tail)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return &childError{bin: t.bin, err: err, output: tail.lines, log: logFile.Name()}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := userfile.ReadFile(path, 0)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// pace is the points' rate: over the whole exploration, the reference
// runs and the report included (what a user waits), and while the points
// ran, which does not depend on how many points share the fixed part.
func pace(points int, all, running time.Duration) string {
	out := fmt.Sprintf("points per second: %.1f in all (%d in %.2fs, the reference runs and the report included)", float64(points)/all.Seconds(), points, all.Seconds())
	if running > 0 {
		out += fmt.Sprintf(", %.1f while the points ran (%.2fs)", float64(points)/running.Seconds(), running.Seconds())
	}
	return out
}
