package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/internal/kubebuilder"
)

func initCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write the first converge test of a kubebuilder or operator-sdk project",
		Long: `init reads the kubebuilder or operator-sdk project holding DIR (the
current folder by default; the project is found by its PROJECT file) and
writes, in its controllers' package, converge_test.go (TestMain and
TestScenarios: a scenarios.Manager wired to each reconciler's
SetupWithManager, the project's API types in its scheme, config/rbac as
the controller's identity) and one starter scenario per kind with a sample
in config/samples, under testdata/converge. Each is a starting point to
edit. It writes no file that exists, and nothing when it cannot read the
project.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			root, err := kubebuilder.Find(dir)
			if err != nil {
				return err
			}
			files, notes, err := kubebuilder.Plan(root)
			if err != nil {
				return fmt.Errorf("%s: %w (nothing written)", root, err)
			}
			if err := kubebuilder.Write(root, files); err != nil {
				return fmt.Errorf("%s: %w", root, err)
			}
			fmt.Fprintf(stdout, "converge init: in %s, wrote\n", root)
			for _, f := range files {
				fmt.Fprintf(stdout, "  %s\n", f.Path)
			}
			for _, n := range notes {
				fmt.Fprintf(stdout, "note: %s\n", n)
			}
			fmt.Fprintf(stdout, "next: go mod tidy && go test ./%s\n", testDir(files))
			return nil
		},
	}
	return cmd
}

// testDir is the folder of the first test file written.
func testDir(files []kubebuilder.File) string {
	var dirs []string
	for _, f := range files {
		if filepath.Base(f.Path) == "converge_test.go" {
			dirs = append(dirs, filepath.ToSlash(filepath.Dir(f.Path)))
		}
	}
	switch len(dirs) {
	case 0:
		return "..."
	case 1:
		return dirs[0]
	}
	// Several packages (a multigroup project's): their common folder.
	common := strings.Split(dirs[0], "/")
	for _, d := range dirs[1:] {
		parts := strings.Split(d, "/")
		n := 0
		for n < len(common) && n < len(parts) && common[n] == parts[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 0 {
		return "..."
	}
	return strings.Join(common, "/") + "/..."
}
