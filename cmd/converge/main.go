// Command converge runs scenarios against a controller and writes their
// results, JUnit XML and the HTML report; it explores a scenario for bugs
// and shrinks a failing run to its cause.
//
//	converge list [--package PKG]
//	converge run [SCENARIO | FILE.yaml ...] --backend fake,envtest,cluster --seeds 1-5 --report DIR --junit FILE
//	converge replay RESULT.json
//	converge report RESULTS_DIR
//	converge judge RESULT.json|RESULTS_DIR... [--scenario FILE] [--out DIR]
//	converge merge RESULTS_DIR... --report DIR
//	converge explore SCENARIO | FILE.yaml
//	converge shrink RESULT.json
//	converge kwok [-- COMMAND [ARG...]]
//
// Every backend's runs go through compiled scenario tests (go test -c of
// ./scenarios, or of the package --package names): on fake that is what
// gives virtual time (a synctest bubble exists only inside a test), so a
// ten-minute scenario takes a fraction of a second; envtest runs share a
// control plane per process, and cluster runs go to --kubeconfig's cluster
// or to a kwokctl cluster --kwok starts. docs/reference/cli.md describes
// every command and flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "converge:", err)
		os.Exit(exitCode(err))
	}
}

// errFailed: some run failed its verdict (exit 1); usage errors exit 2.
var errFailed = errors.New("some runs failed")

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	var st exitStatus
	if errors.As(err, &st) {
		return st.code
	}
	return 1
}

// exitStatus is a command's exit status passed on (converge kwok -- CMD).
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string { return e.err.Error() }

// Run is the whole CLI.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := rootCommand(ctx, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		return usageError{err}
	}
	return err
}

// rootCommand is the command tree, writing to stdout and stderr.
func rootCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Run chaos scenarios against a Kubernetes controller and judge whether the world converges",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(listCommand(ctx, stdout, stderr), runCommand(ctx, stdout, stderr), replayCommand(ctx, stdout, stderr), reportCommand(stdout),
		exploreCommand(ctx, stdout, stderr), shrinkCommand(ctx, stdout, stderr), mergeCommand(stdout), judgeCommand(ctx, stdout),
		kwokCommand(ctx, stdout, stderr))
	return root
}
