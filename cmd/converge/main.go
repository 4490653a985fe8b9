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
// every command and flag, and how a command obeys SIGINT and SIGTERM.
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
	"time"

	"github.com/spf13/cobra"
)

func main() {
	collectLess()
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGrace is how long a command has to wind down after a first
// SIGINT or SIGTERM unless $CONVERGE_GRACE says otherwise: long enough for
// its children to end and its summary to be written, short enough that an
// interrupt is obeyed.
const defaultGrace = 10 * time.Second

// graceEnv names the variable that sets the grace, as a Go duration.
const graceEnv = "CONVERGE_GRACE"

// runMain runs the CLI under the interrupt rules: a first SIGINT or
// SIGTERM cancels the command, which ends its children and writes what it
// has; a second one, or the grace running out, kills every child's
// process group and exits at once, 128 + the signal's number, saying what
// was abandoned. Whatever the command is blocked on, it ends.
func runMain(args []string, stdout, stderr io.Writer) int {
	grace := defaultGrace
	if v := os.Getenv(graceEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "converge: $%s=%q: want a positive duration such as 10s\n", graceEnv, v)
			return 2
		}
		grace = d
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kids := &children{}
	done := make(chan error, 1)
	go func() { done <- Run(withChildren(ctx, kids), args, stdout, stderr) }()
	var first os.Signal
	var expired <-chan time.Time
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(stderr, "converge:", err)
				return exitCode(err)
			}
			return 0
		case sig := <-signals:
			if first == nil {
				first = sig
				cancel()
				fmt.Fprintf(stderr, "converge: %v: stopping; exiting at once after %v or on a second signal\n", sig, grace)
				expired = time.After(grace)
				continue
			}
			fmt.Fprintf(stderr, "converge: %v again: %s\n", sig, abandoned(kids.kill()))
			return signalStatus(first)
		case <-expired:
			fmt.Fprintf(stderr, "converge: still running %v after %v: %s\n", grace, first, abandoned(kids.kill()))
			return signalStatus(first)
		}
	}
}

// signalStatus is the exit status of a command ended by sig, as a shell
// reports one: 128 + its number.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
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
		Use:   "converge",
		Short: "Run chaos scenarios against a Kubernetes controller and judge whether the world converges",
		Long: `On a first SIGINT or SIGTERM a command stops: it ends the processes it
started (SIGTERM to each one's process group) and writes what it has, a
campaign's summary and report of the runs that ended included. A second
signal, or the grace running out ($CONVERGE_GRACE, 10s unless set), exits
at once with status 128 + the first signal's number (130, 143), after
killing every process group it started, each named with its pid.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(listCommand(ctx, stdout, stderr), runCommand(ctx, stdout, stderr), replayCommand(ctx, stdout, stderr), reportCommand(stdout),
		exploreCommand(ctx, stdout, stderr), shrinkCommand(ctx, stdout, stderr), mergeCommand(stdout), judgeCommand(ctx, stdout),
		kwokCommand(ctx, stdout, stderr), initCommand(stdout))
	return root
}
