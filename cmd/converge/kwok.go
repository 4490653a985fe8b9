package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-lab/converge/sim/kwok"
)

// kwokHeld names a kwok cluster the command deletes when it ends.
func kwokHeld(kc *kwok.Cluster) string {
	return fmt.Sprintf("the kwok cluster %s (its files and pid files in %s)", kc.Name(), kc.Workdir())
}

// kwokCommand starts a kwokctl cluster of processes and keeps it until
// interrupted, or runs a command against it.
func kwokCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "kwok [-- COMMAND [ARG...]]",
		Short: "Start a kwokctl cluster of processes (no containers) until interrupted, or run a command against it",
		Long: `Start a cluster of processes with kwokctl's binary runtime: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built from
source, and the kwok controller playing the Nodes' kubelets (make assets
builds them all; nothing is downloaded). Without a command it prints the
cluster's kubeconfig and keeps it until interrupted; with one, it runs the
command with KUBECONFIG set to the cluster and exits with its status. The
cluster is deleted afterwards, with every process it started, on interrupt
too. Point the cluster backend at it with
converge run --backend cluster --kubeconfig PATH, or let
converge run --backend cluster --kwok start one.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() > 0 {
				return usageError{fmt.Errorf("unexpected arguments before --: %q", args[:cmd.ArgsLenAtDash()])}
			}
			if _, _, err := kwok.Binaries(""); err != nil {
				return usageError{err}
			}
			kc, err := kwok.Start(ctx, kwok.Options{})
			if err != nil {
				return err
			}
			release := hold(ctx, kwokHeld(kc))
			defer func() {
				if err := kc.Stop(); err != nil {
					fmt.Fprintf(stderr, "deleting the kwok cluster: %v\n", err)
				}
				release()
			}()
			fmt.Fprintf(stderr, "kwok cluster %s ready in %v\n", kc.Name(), kc.Started.Round(time.Millisecond))
			if len(args) == 0 {
				fmt.Fprintf(stdout, "kubeconfig: %s\n", kc.Kubeconfig())
				fmt.Fprintln(stderr, "interrupt to delete the cluster")
				<-ctx.Done()
				return nil
			}
			c := newChild(ctx, "the command "+args[0], args[0], args[1:]...).inForeground()
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
			c.Env = append(os.Environ(), "KUBECONFIG="+kc.Kubeconfig())
			if err := c.Run(); err != nil {
				if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() > 0 {
					return exitStatus{code: exit.ExitCode(), err: fmt.Errorf("%s: %w", args[0], err)}
				}
				return err
			}
			return nil
		},
	}
}
