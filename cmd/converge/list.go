package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

func listCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the catalogue's scenarios, or those of --package or --test-binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var listed []scenariotest.Listed
			if f.pkg == "" && f.testBinary == "" {
				all, err := scaler.Catalogue()
				if err != nil {
					return err
				}
				for _, s := range all {
					l := scenariotest.Listed{Name: s.Name, Backends: s.RunsOnBackends(), Catches: s.Catches}
					for _, fault := range s.Faults {
						l.Faults = append(l.Faults, fault.Fault)
					}
					listed = append(listed, l)
				}
			} else {
				if f.testBinary != "" && f.pkg != "" {
					return usageError{errors.New("--test-binary and --package both name the tests; pass one")}
				}
				t, err := findTests(ctx, f, stderr)
				if err != nil {
					return err
				}
				if listed, err = t.list(ctx, nil); err != nil {
					return err
				}
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKENDS\tFAULTS\tCATCHES")
			for _, l := range listed {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, strings.Join(l.Backends, ","), orDash(strings.Join(slices.Compact(l.Faults), ",")), oneLine(l.Catches, 70))
			}
			return tw.Flush()
		},
	}
	f.testFlags(cmd)
	return cmd
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
