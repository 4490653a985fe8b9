// Command testtime reads the output of `go test -json` and says where the
// time went: the slowest packages and tests, and how many tests ran, passed,
// failed and were skipped (those of the full tier among them). With
// -covers, it checks that every test that ran in the first file ran in one
// of the others: that moving tests between tiers lost none.
//
//	go test -json ./... > run.json; go run ./hack/testtime run.json
//	go run ./hack/testtime -covers before.json short.json full.json
//
// Lines that are not JSON (make's, the build's) are ignored, so the whole
// output of `make test` with TESTFLAGS=-json can be given as it is. With
// -stamp, it copies its input to its output instead, each line after the
// seconds since it started (hack/ci-time.sh's log).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/converge-lab/converge/sim/simtest/tier"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testtime:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("testtime", flag.ContinueOnError)
	pkgs := fs.Int("packages", 10, "how many of the slowest packages to list")
	tests := fs.Int("tests", 20, "how many of the slowest tests to list")
	covers := fs.Bool("covers", false, "check that every test that ran in the first file ran in one of the others")
	stampLines := fs.Bool("stamp", false, "copy standard input to standard output, each line after the seconds since the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *stampLines {
		return stamp(os.Stdin, out, time.Now)
	}
	if fs.NArg() == 0 {
		return errors.New("usage: testtime [-packages N] [-tests N] FILE... or testtime -covers BEFORE AFTER... (go test -json files)")
	}
	var runs []*summary
	for _, name := range fs.Args() {
		s, err := readFile(name)
		if err != nil {
			return err
		}
		runs = append(runs, s)
	}
	if *covers {
		if len(runs) < 2 {
			return errors.New("-covers needs the run before and at least one run after")
		}
		return coverage(out, fs.Args(), runs)
	}
	for i, s := range runs {
		if len(runs) > 1 {
			fmt.Fprintf(out, "== %s\n", fs.Arg(i))
		}
		s.print(out, *pkgs, *tests)
	}
	return nil
}

// stamp copies in to out, each line after the whole seconds since it began.
func stamp(in io.Reader, out io.Writer, now func() time.Time) error {
	start := now()
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			fmt.Fprintf(w, "%5d %s", int(now().Sub(start).Seconds()), line)
			if r.Buffered() == 0 {
				if err := w.Flush(); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return w.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// event is one line of test2json's output.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// result is how one package or test ended.
type result struct {
	name     string
	action   string // pass, fail or skip
	elapsed  time.Duration
	fullTier bool
}

type summary struct {
	packages map[string]*result
	tests    map[string]*result // by "package TestName/sub"
	first    time.Time
	last     time.Time
}

func readFile(name string) (*summary, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func read(r io.Reader) (*summary, error) {
	s := &summary{packages: map[string]*result{}, tests: map[string]*result{}}
	output := map[string]*strings.Builder{} // a test's output so far
	began := map[string]time.Time{}         // when a test ran
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if json.Unmarshal(line, &e) != nil || e.Package == "" {
			continue
		}
		if !e.Time.IsZero() {
			if s.first.IsZero() || e.Time.Before(s.first) {
				s.first = e.Time
			}
			if e.Time.After(s.last) {
				s.last = e.Time
			}
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "run", "cont": // a parallel test pauses, then continues
			began[key] = e.Time
		case "output":
			if e.Test != "" {
				b := output[key]
				if b == nil {
					b = &strings.Builder{}
					output[key] = b
				}
				if b.Len() < 64<<10 {
					b.WriteString(e.Output)
				}
			}
		case "pass", "fail", "skip":
			res := &result{name: e.Test, action: e.Action, elapsed: time.Duration(e.Elapsed * float64(time.Second))}
			// A test's Elapsed leaves out its parallel subtests, which run
			// after its function returns: its wall time is from its run
			// (or, if it is parallel, from when it continued) to its end.
			if at, ok := began[key]; ok && !e.Time.IsZero() {
				res.elapsed = max(res.elapsed, e.Time.Sub(at))
			}
			if e.Test == "" {
				res.name = e.Package
				s.packages[e.Package] = res
				continue
			}
			if b := output[key]; b != nil {
				res.fullTier = e.Action == "skip" && strings.Contains(b.String(), tier.Mark)
				delete(output, key)
			}
			s.tests[key] = res
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.packages) == 0 && len(s.tests) == 0 {
		return nil, errors.New("no go test -json events")
	}
	return s, nil
}

func (s *summary) print(out io.Writer, nPkgs, nTests int) {
	var ran, passed, failed, skipped, full int
	for _, r := range s.tests {
		switch r.action {
		case "pass":
			ran++
			passed++
		case "fail":
			ran++
			failed++
		case "skip":
			skipped++
			if r.fullTier {
				full++
			}
		}
	}
	fmt.Fprintf(out, "tests (subtests included): %d ran, %d passed, %d failed, %d skipped (%d of them full tier)\n", ran, passed, failed, skipped, full)
	if !s.first.IsZero() {
		fmt.Fprintf(out, "go test: %v from its first event to its last\n", s.last.Sub(s.first).Round(time.Second))
	}
	var failedPkgs []string
	for name, r := range s.packages {
		if r.action == "fail" {
			failedPkgs = append(failedPkgs, name)
		}
	}
	if len(failedPkgs) > 0 {
		slices.Sort(failedPkgs)
		fmt.Fprintf(out, "failed packages: %s\n", strings.Join(failedPkgs, " "))
	}

	fmt.Fprintf(out, "\nslowest packages:\n")
	for _, r := range slowest(s.packages, nPkgs, func(*result) bool { return true }) {
		fmt.Fprintf(out, "  %8s  %-4s  %s\n", seconds(r.elapsed), r.action, r.name)
	}
	fmt.Fprintf(out, "\nslowest tests (top level):\n")
	for _, r := range slowest(s.tests, nTests, func(r *result) bool { return !strings.Contains(r.name, "/") }) {
		fmt.Fprintf(out, "  %8s  %-4s  %s\n", seconds(r.elapsed), r.action, r.key)
	}
}

type ranked struct {
	*result
	key string
}

func slowest(m map[string]*result, n int, keep func(*result) bool) []ranked {
	var all []ranked
	for k, r := range m {
		if keep(r) {
			all = append(all, ranked{r, k})
		}
	}
	slices.SortFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.elapsed, a.elapsed), cmp.Compare(a.key, b.key))
	})
	return all[:min(n, len(all))]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// coverage prints the tests that ran (passed or failed) in the first run and
// in none of the others, and fails when there is one.
func coverage(out io.Writer, names []string, runs []*summary) error {
	ranIn := func(s *summary, key string) bool {
		r := s.tests[key]
		return r != nil && r.action != "skip"
	}
	var ran, lost []string
	for key := range runs[0].tests {
		if !ranIn(runs[0], key) {
			continue
		}
		ran = append(ran, key)
		if !slices.ContainsFunc(runs[1:], func(s *summary) bool { return ranIn(s, key) }) {
			lost = append(lost, key)
		}
	}
	slices.Sort(lost)
	for i, s := range runs[1:] {
		n := 0
		for key := range s.tests {
			if ranIn(s, key) && ranIn(runs[0], key) {
				n++
			}
		}
		fmt.Fprintf(out, "%s: ran %d of the %d tests that ran in %s\n", names[i+1], n, len(ran), names[0])
	}
	for _, key := range lost {
		fmt.Fprintf(out, "  not run after: %s\n", key)
	}
	if len(lost) > 0 {
		return fmt.Errorf("%d of %d tests that ran in %s ran in none of the others", len(lost), len(ran), names[0])
	}
	fmt.Fprintf(out, "every one of the %d tests that ran in %s ran in one of the others\n", len(ran), names[0])
	return nil
}
