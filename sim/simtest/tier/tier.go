// Package tier names the tier of a slow test. make test (presubmit, what
// CI runs) passes go test's -short; make test-full (the nightly job) does
// not, and runs every test.
//
// The tiers are go test's own -short rather than a build tag or a flag of
// ours: every package understands it without importing anything, go vet
// and staticcheck see every test whatever the tier, and a plain go test
// runs everything, as in Go's own tree.
package tier

import "testing"

// Mark starts the message of every test skipped as one of the full tier,
// so a count of go test -json's output can tell them from other skips
// (hack/testtime).
const Mark = "full tier:"

// Full marks t as a test of the full tier: the whole matrix of catalogue,
// profiles and backends in real time, run by make test-full (the nightly
// job: go test without -short). Under -short, which make test (presubmit,
// .ci/run) passes, t is skipped, saying why it is slow.
func Full(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s %s; make test-full (go test without -short) runs it", Mark, why)
	}
}
