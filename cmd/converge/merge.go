package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/reports"
)

// mergeCommand joins the results of a campaign's shards into one report.
func mergeCommand(stdout io.Writer) *cobra.Command {
	var s summary
	cmd := &cobra.Command{
		Use:   "merge RESULTS_DIR... --report DIR",
		Short: "Join the results of a campaign's shards (converge run --shard) into one report",
		Long: `Join the results of several folders, such as the shards of one campaign
(converge run --shard i/n on several machines), into --report: every result
copied there, index.html and a page per run, JUnit with --junit, and the
table of runs, failures and times per scenario. A run found in two folders
is refused: two shards of different campaigns, or one folder given twice.
Exits 1 if any run failed, as converge run does.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("merge takes one or more folders of results")}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return merge(args, s, stdout)
		},
	}
	cmd.Flags().StringVar(&s.report, "report", "", "folder for the joined results and report (required)")
	cmd.Flags().StringVar(&s.junit, "junit", "", "write JUnit XML here")
	return cmd
}

func merge(dirs []string, s summary, stdout io.Writer) error {
	if s.report == "" {
		return usageError{errors.New("merge needs --report, the folder for the joined results")}
	}
	out, err := filepath.Abs(s.report)
	if err != nil {
		return usageError{err}
	}
	s.report = out
	type from struct {
		dir string
		r   *reports.Result
	}
	seen := map[string]string{}
	var all []from
	var errs []error
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return usageError{err}
		}
		if st, err := os.Stat(abs); err != nil {
			return usageError{fmt.Errorf("results folder: %w", err)}
		} else if !st.IsDir() {
			return usageError{fmt.Errorf("%s is not a folder of results", dir)}
		}
		results, readErr := reports.ReadDir(abs)
		if readErr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, readErr))
		}
		for _, r := range results {
			if other, dup := seen[r.FileName()]; dup {
				return usageError{fmt.Errorf("run %s/%s/seed-%d is in both %s and %s: merge the shards of one campaign, each once", r.Scenario, r.Backend, r.Seed, other, dir)}
			}
			seen[r.FileName()] = dir
			all = append(all, from{abs, r})
		}
	}
	if len(all) == 0 {
		return errors.Join(append([]error{fmt.Errorf("no results in %s", strings.Join(dirs, ", "))}, errs...)...)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return usageError{fmt.Errorf("--report: %w", err)}
	}
	if s.junit != "" {
		// Found now, not after the report is written.
		if err := userfile.Writable(s.junit); err != nil {
			return usageError{fmt.Errorf("--junit: %w", err)}
		}
	}
	results := make([]*reports.Result, 0, len(all))
	for _, f := range all {
		if f.dir != out {
			if _, err := reports.Write(out, f.r); err != nil {
				return err
			}
		}
		results = append(results, f.r)
	}
	fmt.Fprintf(stdout, "%d results from %d folders\n", len(results), len(dirs))
	err = summarise(results, nil, s, 0, stdout)
	if len(errs) > 0 {
		err = errors.Join(err, fmt.Errorf("some files were skipped: %w", errors.Join(errs...)))
	}
	return err
}
