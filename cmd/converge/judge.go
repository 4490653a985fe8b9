package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

// judgeCommand judges saved runs again from their histories.
func judgeCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	var scenarioFile, out string
	cmd := &cobra.Command{
		Use:   "judge RESULT.json|RESULTS_DIR ...",
		Short: "Judge saved runs again from their histories, with a scenario's current checks",
		Long: `Judge saved runs again from their recorded histories alone, without running
anything: the scenario's invariants, write rules, goal, budgets and allowed
checks are judged on the objects the run saw, the writes it sent and the
instants its goal was polled at.

--scenario FILE judges every run under that scenario file (its checks as they
are now, a new invariant included); without it each run is judged under the
scenario it ran, as its result holds it. Kept as recorded: what a run found as
it happened (a panic, a hot loop, an instance that did not stop, the findings
of the controller's own judge) and its harness error. A run whose record ends
before the new goal was reached or missed fails saying so.

Each run prints one line: PASS or FAIL, the run, and what changed from the
saved verdict. --out DIR writes the judged results there (and the HTML
report); the saved ones are left as they are. Exits 1 when a run fails.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("judge: name result files or folders of them")}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			var s *scenarios.Scenario
			if scenarioFile != "" {
				var err error
				if s, err = scenarios.Load(scenarioFile); err != nil {
					return usageError{err}
				}
			}
			saved, readErr := readResults(args)
			if len(saved) == 0 {
				if readErr != nil {
					return readErr
				}
				return usageError{errors.New("judge: no results (*.json) in what was named")}
			}
			var judged []*reports.Result
			var errs []error
			failed := 0
			for _, old := range saved {
				if err := ctx.Err(); err != nil {
					return err
				}
				if s != nil && s.Name != old.Scenario {
					errs = append(errs, fmt.Errorf("%s: a run of %q, the scenario is %q", old.FileName(), old.Scenario, s.Name))
					continue
				}
				res, err := scenarios.Rejudge(old, s)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", old.FileName(), err))
					continue
				}
				judged = append(judged, res)
				verdict := "PASS"
				if !res.Pass {
					verdict, failed = "FAIL", failed+1
				}
				fmt.Fprintf(stdout, "%s %s %s seed %d%s\n", verdict, res.Scenario, res.Backend, res.Seed, changes(old, res))
			}
			fmt.Fprintf(stdout, "%d runs judged, %d failed\n", len(judged), failed)
			if out != "" && len(judged) > 0 {
				for _, res := range judged {
					if _, err := reports.Write(out, res); err != nil {
						return err
					}
				}
				index, err := reports.WriteHTML(out, judged, "")
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "report: %s\n", index)
			}
			errs = append(errs, readErr)
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if failed > 0 {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&scenarioFile, "scenario", "", "judge under this scenario file rather than the one each run holds")
	cmd.Flags().StringVar(&out, "out", "", "write the judged results and their HTML report into this folder")
	return cmd
}

// readResults reads result files and every result in folders.
func readResults(paths []string) ([]*reports.Result, error) {
	var out []*reports.Result
	var errs []error
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.IsDir() {
			rs, err := reports.ReadDir(p)
			out = append(out, rs...)
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		r, err := reports.Read(filepath.Clean(p))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// changes says how the judged verdict differs from the saved one: ""
// when the same checks fail.
func changes(old, res *reports.Result) string {
	checks := func(r *reports.Result) []string {
		var out []string
		for _, f := range r.Findings {
			if f.Fails() {
				out = append(out, f.Check)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	before, after := checks(old), checks(res)
	var added, gone []string
	for _, c := range after {
		if !slices.Contains(before, c) {
			added = append(added, c)
		}
	}
	for _, c := range before {
		if !slices.Contains(after, c) {
			gone = append(gone, c)
		}
	}
	s := ""
	if len(added) > 0 {
		s += fmt.Sprintf("; now fails %v", added)
	}
	if len(gone) > 0 {
		s += fmt.Sprintf("; no longer fails %v", gone)
	}
	if s == "" && len(after) > 0 {
		s = fmt.Sprintf(": %v", after)
	}
	return s
}
