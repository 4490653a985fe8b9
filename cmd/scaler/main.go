// Command scaler runs the converge reference controller: it doubles the
// replicas of opted-in Deployments whose pods are less than half ready.
// Run it with --help for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signalContext(os.Stderr)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, pflag.ErrHelp):
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(os.Stderr, "scaler: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "scaler: %v\n", err)
		os.Exit(1)
	}
}

// signalContext ends its context on the first SIGTERM or SIGINT, which starts
// the graceful shutdown; a second signal exits with status 1 at once.
func signalContext(stderr io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	go func() {
		s := <-signals
		cancel(fmt.Errorf("received %v", s))
		s = <-signals
		fmt.Fprintf(stderr, "scaler: received %v again, exiting at once\n", s)
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(signals); cancel(nil) }
}
