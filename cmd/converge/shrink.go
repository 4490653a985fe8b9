package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/explore"
)

func shrinkCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "shrink RESULT.json",
		Short: "Reduce a failing run to the fewest faults that still fail",
		Long: `Reduce a failing run (of converge run, explore or a seeded chaos campaign) to a
1-minimal fault schedule: delta debugging over what fired in it (each firing
as a fault aimed at its request, at its instant), then each remaining fault
made simpler (earlier, a shorter window or delay, fewer firings), on the fake
backend. A candidate runs with ` + strconv.Itoa(explore.Tries) + ` seeds and fails if it fails in as many of them as
the run's own schedule does, so a failure seen in every run shrinks to a cause
seen in every run; candidates are cached. It writes the shrunk scenario beside the result (or into
--report) and prints the command that replays it. A run of a controller other
than the scaler needs its tests: --package or --test-binary.`,
		Args: exactlyOne("shrink", "one result file"),
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := reports.Read(args[0])
			if err != nil {
				return usageError{err}
			}
			if old.Pass {
				return usageError{fmt.Errorf("%s passed: there is nothing to shrink", args[0])}
			}
			if err := f.testsOf(args[0], old); err != nil {
				return err
			}
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			dir := f.report
			if dir == "" {
				dir = filepath.Dir(abs)
			}
			if dir, err = filepath.Abs(dir); err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			t, err := findTests(ctx, f, stderr)
			if err != nil {
				return err
			}
			listed, err := t.list(ctx, nil)
			if err != nil {
				return err
			}
			root := strings.Split(listed[0].Test, "/")[0]
			began := time.Now()
			args2 := []string{"-test.run", "^" + regexp.QuoteMeta(root) + "$", "-test.count=1", "-test.timeout=0", "-test.v"}
			inv := t.invocation()
			inv.Shrink, inv.Report = abs, dir
			if err := runTests(ctx, "the shrinking of "+args[0], t, args2, inv, nil, 1, dir, stderr); err != nil {
				return err
			}
			var out struct {
				explore.Shrunk
				File   string `json:"file"`
				Replay string `json:"replay"`
			}
			if err := readJSON(filepath.Join(dir, "shrunk.json"), &out); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "shrunk from %d faults to %d in %d runs (%d schedules tried, %v):\n", len(out.From), len(out.Faults), out.Runs, out.Candidates, time.Since(began).Round(time.Millisecond))
			for _, s := range out.Faults {
				b, _ := json.Marshal(s)
				fmt.Fprintf(stdout, "  %s\n", b)
			}
			if len(out.Faults) == 0 {
				fmt.Fprintln(stdout, "  (none: the run fails without any fault)")
			}
			fmt.Fprintf(stdout, "a schedule counted as failing when %d of its %d seeded runs failed\n", out.Need, explore.Tries)
			if out.Exhausted {
				fmt.Fprintln(stdout, "the budget ran out first: smaller, but maybe not 1-minimal")
			}
			fmt.Fprintf(stdout, "scenario: %s\nreplay: converge run %s --backend fake --seeds %d%s\n", out.File, text.ShellQuote(out.File), out.Seed, t.flag)
			return nil
		},
	}
	f.testFlags(cmd)
	cmd.Flags().StringVar(&f.report, "report", "", "folder for the shrunk scenario (default: the result's folder)")
	return cmd
}
