package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run of two packages: a parallel test whose subtests outlast its
// function, a test of the full tier skipped, another skipped for a reason
// of its own, and a failure. Lines that are not JSON are make's.
const twoPackages = `make: entering
{"Time":"2026-12-03T10:00:00Z","Action":"start","Package":"p/a"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"p/a","Test":"TestSlow"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"p/a","Test":"TestSlow/one"}
{"Time":"2026-12-03T10:01:40Z","Action":"pass","Package":"p/a","Test":"TestSlow/one","Elapsed":100}
{"Time":"2026-12-03T10:01:40Z","Action":"pass","Package":"p/a","Test":"TestSlow","Elapsed":1}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"p/a","Test":"TestWaits"}
{"Time":"2026-12-03T10:00:00Z","Action":"pause","Package":"p/a","Test":"TestWaits"}
{"Time":"2026-12-03T10:01:40Z","Action":"cont","Package":"p/a","Test":"TestWaits"}
{"Time":"2026-12-03T10:01:42Z","Action":"pass","Package":"p/a","Test":"TestWaits","Elapsed":2}
{"Time":"2026-12-03T10:01:40Z","Action":"run","Package":"p/a","Test":"TestNightly"}
{"Time":"2026-12-03T10:01:40Z","Action":"output","Package":"p/a","Test":"TestNightly","Output":"    x_test.go:9: full tier: a matrix; make test-full runs it\n"}
{"Time":"2026-12-03T10:01:40Z","Action":"skip","Package":"p/a","Test":"TestNightly","Elapsed":0}
{"Time":"2026-12-03T10:01:40Z","Action":"run","Package":"p/a","Test":"TestNoBinaries"}
{"Time":"2026-12-03T10:01:40Z","Action":"output","Package":"p/a","Test":"TestNoBinaries","Output":"    x_test.go:9: SKIPPED (envtest)\n"}
{"Time":"2026-12-03T10:01:40Z","Action":"skip","Package":"p/a","Test":"TestNoBinaries","Elapsed":0}
{"Time":"2026-12-03T10:01:41Z","Action":"pass","Package":"p/a","Elapsed":101}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"p/b","Test":"TestBroken"}
{"Time":"2026-12-03T10:00:05Z","Action":"fail","Package":"p/b","Test":"TestBroken","Elapsed":5}
{"Time":"2026-12-03T10:00:05Z","Action":"fail","Package":"p/b","Elapsed":5}
make: leaving
`

func TestSummary(t *testing.T) {
	s, err := read(strings.NewReader(twoPackages))
	require.NoError(t, err)
	assert.Equal(t, 100*time.Second, s.tests["p/a TestSlow"].elapsed, "from its run to its end, its parallel subtests included")
	assert.Equal(t, 2*time.Second, s.tests["p/a TestWaits"].elapsed, "a parallel test from when it continued")
	assert.True(t, s.tests["p/a TestNightly"].fullTier)
	assert.False(t, s.tests["p/a TestNoBinaries"].fullTier)

	var out bytes.Buffer
	s.print(&out, 10, 20)
	text := out.String()
	assert.Contains(t, text, "tests (subtests included): 4 ran, 3 passed, 1 failed, 2 skipped (1 of them full tier)")
	assert.Contains(t, text, "go test: 1m42s from its first event to its last")
	assert.Contains(t, text, "failed packages: p/b")
	assert.Less(t, strings.Index(text, "p/a TestSlow"), strings.Index(text, "p/b TestBroken"), "slowest first")
	assert.NotContains(t, text, "TestSlow/one", "top-level tests only")
}

func TestCoversFindsALostTest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	before := write("before.json", twoPackages)
	// The presubmit tier skips TestSlow; the full tier runs it and
	// TestBroken; nothing runs TestSlow/one in either.
	short := write("short.json", `{"Action":"skip","Package":"p/a","Test":"TestSlow"}
{"Action":"pass","Package":"p/b","Test":"TestBroken"}
`)
	full := write("full.json", `{"Action":"pass","Package":"p/a","Test":"TestSlow"}
`)
	var out bytes.Buffer
	err := run([]string{"-covers", before, short, full}, &out)
	require.Error(t, err)
	assert.Contains(t, out.String(), "not run after: p/a TestSlow/one")
	assert.ErrorContains(t, err, "2 of 4 tests")

	full = write("full.json", `{"Action":"pass","Package":"p/a","Test":"TestSlow"}
{"Action":"pass","Package":"p/a","Test":"TestSlow/one"}
{"Action":"pass","Package":"p/a","Test":"TestWaits"}
`)
	out.Reset()
	require.NoError(t, run([]string{"-covers", before, short, full}, &out))
	assert.Contains(t, out.String(), "every one of the 4 tests")
}

func TestStampPrefixesEachLine(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	calls := 0
	now := func() time.Time { calls++; return start.Add(time.Duration(calls-1) * 61 * time.Second) }
	var out bytes.Buffer
	require.NoError(t, stamp(strings.NewReader("a\nb\nno newline"), &out, now))
	assert.Equal(t, "   61 a\n  122 b\n  183 no newline\n", out.String())
}

func TestBadInput(t *testing.T) {
	_, err := read(strings.NewReader("not json\n{\"Action\":\"pass\"}\n"))
	assert.ErrorContains(t, err, "no go test -json events")
	assert.Error(t, run(nil, &bytes.Buffer{}))
	assert.Error(t, run([]string{"-covers", filepath.Join(t.TempDir(), "missing.json")}, &bytes.Buffer{}))
}
