package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/reports"
)

// reportCommand renders the HTML report of saved results again.
func reportCommand(stdout io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RESULTS_DIR",
		Short: "Render the HTML report (index.html and a page per run) from saved result files",
		Long: `Render the HTML report from the result files (*.json) in RESULTS_DIR: index.html
and one self-contained page per run under runs/, written into --out (default:
RESULTS_DIR). A file that is not a result is named and skipped; the others
are rendered, and the command then exits 1.`,
		Args: exactlyOne("report", "one folder of results"),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" {
				out = dir
			}
			if st, err := os.Stat(dir); err != nil {
				return usageError{fmt.Errorf("results folder: %w", err)}
			} else if !st.IsDir() {
				return usageError{fmt.Errorf("%s is not a folder of results", dir)}
			}
			results, readErr := reports.ReadDir(dir)
			if len(results) == 0 {
				if readErr != nil {
					return fmt.Errorf("no readable results in %s: %w", dir, readErr)
				}
				return fmt.Errorf("no results (*.json) in %s", dir)
			}
			index, err := reports.WriteHTML(out, results, "")
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d runs\nreport: %s\n", len(results), index)
			if readErr != nil {
				return fmt.Errorf("some files were skipped: %w", readErr)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the report here (default: RESULTS_DIR)")
	return cmd
}
