// Command converge runs converge's scenarios against a controller and
// writes their results, JUnit XML and (with the reports package) the HTML
// report.
//
//	converge list
//	converge run [SCENARIO|FILE.yaml ...] --backend fake,envtest --seeds 1-5 --report DIR --junit FILE
//	converge replay RESULT.json
//
// On the fake and envtest backends, run drives the compiled scenario tests
// (`go test -c ./scenarios`): on fake that is what gives virtual time (a
// synctest bubble exists only inside a test), so a ten-minute scenario
// takes a fraction of a second; envtest runs there too, on one shared
// control plane. The cluster backend runs in this process, in real time.
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
