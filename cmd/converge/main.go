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
// or to a kwokctl cluster --kwok starts. docs/guide.md has the whole
// reference.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "converge:", err)
		os.Exit(exitCode(err))
	}
}
