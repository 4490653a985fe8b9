package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim/backends"
)

// replayCommand runs a result's scenario again with its backend and seed
// and says whether the verdict and the fault schedule came out the same.
func replayCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var file string
	var f runFlags
	cmd := &cobra.Command{
		Use:   "replay RESULT.json",
		Short: "Run a result's scenario again with the same backend and seed, and compare",
		Long: `Run a result's scenario again with the same backend and seed, and compare the
verdict and the fault schedule. The result holds the scenario it ran, so no
catalogue or file is needed; --file replays an older result that does not.
A run of a controller other than the scaler needs the tests that ran it:
--package or --test-binary, as converge run had them. A run on the cluster
backend replays on a cluster: --kubeconfig, or --kwok for a kwokctl cluster
started for the replay.`,
		Args: exactlyOne("replay", "one result file"),
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := reports.Read(args[0])
			if err != nil {
				return usageError{err}
			}
			switch {
			case backends.UsesCluster(old.Backend) && f.kubeconfig == "" && !f.kwok:
				return usageError{fmt.Errorf("%s is a run on a cluster: replay it on one with --kubeconfig PATH, or --kwok to start a kwokctl cluster", args[0])}
			case !backends.UsesCluster(old.Backend) && (f.kubeconfig != "" || f.kwok):
				return usageError{fmt.Errorf("%s is a run on %s: --kubeconfig and --kwok are for a run on a cluster", args[0], old.Backend)}
			}
			dir, err := os.MkdirTemp("", "converge-replay-")
			if err != nil {
				return err
			}
			var scenarioArg string
			if err := f.testsOf(args[0], old); err != nil {
				return err
			}
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
				// An older result: the tests' own scenario of that name.
				scenarioArg = old.Scenario
			}
			f.backends, f.seeds, f.report, f.parallel = []string{old.Backend}, strconv.FormatUint(old.Seed, 10), filepath.Join(dir, "results"), 1
			p, err := f.check(ctx, []string{scenarioArg}, stderr)
			if err != nil {
				return err
			}
			if got := p.listed()[0].Name; got != old.Scenario {
				return usageError{fmt.Errorf("%s is scenario %q, the result is of %q", scenarioArg, got, old.Scenario)}
			}
			stop, err := p.startKwok(ctx, stdout, stderr)
			if err != nil {
				return err
			}
			defer stop()
			runErr := runCompiled(ctx, p, stdout, stderr)
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
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster a cluster run replays on")
	cmd.Flags().BoolVar(&f.kwok, "kwok", false, "replay a cluster run on a kwokctl cluster started for the replay and deleted after it")
	f.testFlags(cmd)
	cmd.Flags().DurationVar(&f.runTimeout, "run-timeout", defaultRunTimeout, "wall-clock limit of the run")
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
