package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/sim/backends"
	"golang.org/x/term"
)

// shard is one slice of a campaign's runs: the runs whose place in the
// sorted run set is index modulo count.
type shard struct{ index, count int }

// parseShard reads --shard i/n (i from 0).
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{0, 1}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	count, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil {
		return shard{}, fmt.Errorf("--shard %q: want i/n, such as 0/4 (shards count from 0)", s)
	}
	if count < 1 || count > maxSeeds {
		return shard{}, fmt.Errorf("--shard %q: the number of shards must be within 1..%d", s, maxSeeds)
	}
	if index < 0 || index >= count {
		return shard{}, fmt.Errorf("--shard %q: the shard must be within 0..%d (shards count from 0)", s, count-1)
	}
	return shard{index, count}, nil
}

// pick keeps the shard's runs of all: all sorted by scenario, backend and
// seed, then every count-th from index. The slice depends on the run set
// alone, so the shards of one invocation on n machines cover it once.
func (s shard) pick(all []runKey) []runKey {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b runKey) int {
		return cmp.Or(strings.Compare(a.scenario, b.scenario), strings.Compare(a.backend, b.backend), cmp.Compare(a.seed, b.seed))
	})
	var out []runKey
	for i, k := range sorted {
		if i%s.count == s.index {
			out = append(out, k)
		}
	}
	return out
}

// unit is one process of the compiled tests and the runs it owes. Runs on
// fake share a process per seed, a slice of the seed's scenarios each, one
// run at a time; when such a process dies (a fatal error, the process's own
// timeout), each of its runs that left no result runs again in a process of
// its own, so one run's death takes no other's verdict with it. The runs of
// one seed on envtest or a cluster share a process that starts the control
// plane once and runs them side by side.
type unit struct {
	test     string
	names    []string
	files    bool
	backend  string
	seed     uint64
	heavy    bool // needs a control plane or a cluster: one such unit at a time
	sequence int  // place in the plan, for a stable order of the errors
}

// units cuts the runs into processes: for fake, at least two per process
// slot when there are runs enough, so the slots stay busy to the end.
func units(runs []runKey, parallel int) []*unit {
	var out []*unit
	shared := map[string]*unit{}
	virtual := 0
	for _, k := range runs {
		if backends.Virtual(k.backend) {
			virtual++
		}
	}
	per := max(1, (virtual+2*parallel-1)/(2*parallel))
	for _, k := range runs {
		key := fmt.Sprintf("%s\x00%v\x00%s\x00%d", k.test, k.file, k.backend, k.seed)
		u := shared[key]
		if u == nil || (!u.heavy && len(u.names) == per) {
			u = &unit{test: k.test, files: k.file, backend: k.backend, seed: k.seed, heavy: !backends.Virtual(k.backend), sequence: len(out)}
			shared[key] = u
			out = append(out, u)
		}
		u.names = append(u.names, k.scenario)
	}
	return out
}

// runCompiled runs the plan's runs through the compiled tests, up to
// --parallel processes at once, printing each run as it ends and the
// campaign's progress.
func runCompiled(ctx context.Context, p *plan, stdout, stderr io.Writer) error {
	// The controllers' logs go to a file beside the results, a whole line
	// at a time whichever process wrote it.
	logFile, err := os.OpenFile(filepath.Join(p.report, "scenarios.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := &sharedLog{w: logFile}
	parallel := max(p.parallel, 1)
	work := units(p.runs, parallel)
	tr := newTracker(stdout, len(p.runs))
	defer tr.finish()
	// Units on envtest or a cluster run one at a time, in a lane of their
	// own beside the others.
	var light, heavy []*unit
	for _, u := range work {
		if u.heavy && parallel > 1 {
			heavy = append(heavy, u)
		} else {
			light = append(light, u)
		}
	}
	var mu sync.Mutex
	var childErrs []*childError
	lane := func(jobs <-chan *unit) {
		for u := range jobs {
			if ctx.Err() != nil {
				continue
			}
			err := runUnit(ctx, p, u, log, tr)
			if err != nil && !u.heavy && len(u.names) > 1 && ctx.Err() == nil {
				// Each run the process owed and did not finish, again
				// alone: the one that killed it dies alone.
				err = nil
				for _, name := range p.unfinished(u) {
					alone := *u
					alone.names = []string{name}
					if e := runUnit(ctx, p, &alone, log, tr); e != nil {
						err = e
					}
				}
			}
			if err != nil {
				mu.Lock()
				err.sequence = u.sequence
				childErrs = append(childErrs, err)
				mu.Unlock()
			}
		}
	}
	feed := func(units []*unit) <-chan *unit {
		ch := make(chan *unit, len(units))
		for _, u := range units {
			ch <- u
		}
		close(ch)
		return ch
	}
	var wg sync.WaitGroup
	lanes := parallel
	if len(heavy) > 0 {
		wg.Go(func() { lane(feed(heavy)) })
		lanes--
	}
	lightJobs := feed(light)
	for range min(lanes, len(light)) {
		wg.Go(func() { lane(lightJobs) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if len(childErrs) > 0 {
		slices.SortFunc(childErrs, func(a, b *childError) int { return cmp.Compare(a.sequence, b.sequence) })
		return childErrs[len(childErrs)-1]
	}
	return nil
}

// runUnit runs one process of the compiled tests. A failed verdict fails
// its test, and the results say which; anything else is the process's own
// failure, told with its last output.
func runUnit(ctx context.Context, p *plan, u *unit, log *sharedLog, tr *tracker) *childError {
	// Each run has its own limit; the process's is a backstop for a hang
	// outside any run.
	timeout := p.runTimeout*time.Duration(len(u.names)) + 10*time.Minute
	args := []string{"-test.run", pattern(u.test, u.names), "-test.v", "-test.count=1", "-test.timeout=" + timeout.String()}
	inv := p.tests.invocation()
	inv.Seed, inv.Report, inv.Backends, inv.RunID, inv.RunTimeout, inv.Full = u.seed, p.report, []string{u.backend}, p.runID, p.runTimeout, true
	if u.files {
		inv.Files = p.sel.files
	}
	if backends.UsesCluster(u.backend) {
		inv.Kubeconfig, inv.Kwok = p.kubeconfig, p.kwokDir
	}
	if !u.heavy {
		// The processes side by side are the parallelism.
		args = append(args, "-test.parallel=1")
	}
	tail := &tailWriter{max: 20}
	// One writer per stream: each is written by one goroutine.
	stdoutLog, stderrLog := log.lines(), log.lines()
	defer stdoutLog.flush()
	defer stderrLog.flush()
	cmd := newChild(ctx, fmt.Sprintf("the run of %s on %s, seed %d", strings.Join(u.names, ", "), u.backend, u.seed), p.tests.bin, args...)
	cmd.Dir = p.tests.dir
	cmd.Env = withInvocation(childEnv(os.Environ(), p.parallel), inv)
	cmd.Stderr = io.MultiWriter(stderrLog, tail)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return &childError{bin: p.tests.bin, err: err}
	}
	if err := cmd.Start(); err != nil {
		return &childError{bin: p.tests.bin, err: err}
	}
	tr.read(io.TeeReader(out, io.MultiWriter(stdoutLog, tail)))
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		return &childError{bin: p.tests.bin, err: err, output: tail.lines}
	}
	return nil
}

// withInvocation is env with inv for a test binary of scenarios
// ($CONVERGE_FLAGS, which any test binary reads, whatever its TestMain).
func withInvocation(env []string, inv invocation.Invocation) []string {
	return append(slices.Clip(env), invocation.Env+"="+inv.EnvValue())
}

// childGOGC is the garbage collector's target in the processes that run
// scenarios, unless the caller's environment sets one: a run is short and
// allocates much, and collecting a quarter as often takes a fifth off its
// CPU for a few tens of megabytes more.
const childGOGC = 400

// childEnv is the environment of a process that runs scenarios: GOGC at
// childGOGC, and, so that a large scenario's heap does not grow five-fold
// with it, GOMEMLIMIT at memLimit's share for one of the processes side by
// side (a container's limit counted); either left as the caller set it.
func childEnv(env []string, parallel int) []string {
	var gogc, limit bool
	for _, e := range env {
		gogc = gogc || strings.HasPrefix(e, "GOGC=")
		limit = limit || strings.HasPrefix(e, "GOMEMLIMIT=")
	}
	out := slices.Clip(env)
	if !gogc {
		out = append(out, "GOGC="+strconv.Itoa(childGOGC))
	}
	if l := memLimit(parallel); !limit && l > 0 {
		out = append(out, fmt.Sprintf("GOMEMLIMIT=%dMiB", l>>20))
	}
	return out
}

// collectLess gives this process childEnv's GOGC, and as its memory limit
// a process's share when it runs alone, unless its own environment sets
// them: a report at the end of a campaign or an exploration reads every
// run's result, mostly once its children have ended.
func collectLess() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(childGOGC)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if l := memLimit(1); l > 0 {
			debug.SetMemoryLimit(int64(l))
		}
	}
}

// memLimit is one of parallel processes' share of a quarter of the memory
// converge's processes may use (memAvailable), and no less than 1 GiB, or
// where that is more than all of them with converge may have side by side,
// that much; 0 where the memory is not known.
func memLimit(parallel int) uint64 { return share(available(), parallel) }

// available is memAvailable("/"), read once: a campaign starts a process
// per run.
var available = sync.OnceValue(func() uint64 { return memAvailable("/") })

// share is memLimit's share of total bytes.
func share(total uint64, parallel int) uint64 {
	if total == 0 {
		return 0
	}
	n := uint64(max(parallel, 1))
	return max(total/4/n, min(1<<30, total/(n+1)))
}

// sharedLog is the log file the processes side by side write to, a whole
// line at a time, so their output does not interleave within a line.
type sharedLog struct {
	mu sync.Mutex
	w  io.Writer
}

// lines is a writer of one stream into the log. It is not safe for use
// by two goroutines: give each stream its own.
func (s *sharedLog) lines() *lineWriter { return &lineWriter{log: s} }

type lineWriter struct {
	log     *sharedLog
	partial []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	i := bytes.LastIndexByte(l.partial, '\n')
	if i < 0 {
		if len(l.partial) <= maxLine {
			return len(b), nil
		}
		i = len(l.partial) - 1
	}
	err := l.write(l.partial[:i+1])
	l.partial = append(l.partial[:0], l.partial[i+1:]...)
	return len(b), err
}

func (l *lineWriter) write(b []byte) error {
	l.log.mu.Lock()
	defer l.log.mu.Unlock()
	_, err := l.log.w.Write(b)
	return err
}

// flush writes what is left of a last line.
func (l *lineWriter) flush() {
	if len(l.partial) > 0 {
		_ = l.write(append(l.partial, '\n'))
		l.partial = nil
	}
}

// tracker prints each run as it ends and the campaign's progress: runs done
// and failed and an estimate of the time left, on one line that updates in
// a terminal, and as a plain line at each tenth of the runs in a log.
type tracker struct {
	mu           sync.Mutex
	out          io.Writer
	tty          bool
	total        int
	done, failed int
	began        time.Time
	shown        bool // the progress line is on screen
	lastTenth    int
}

func newTracker(out io.Writer, total int) *tracker {
	tty := false
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("CI") == "" {
		tty = true
	}
	return &tracker{out: out, tty: tty, total: total, began: time.Now()}
}

// runLine is a run's end in go test -v output: TEST/scenario/backend/seed-N,
// where TEST may hold slashes of its own.
var runLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): \S+/([^/\s]+)/([^/\s]+)/(seed-\d+) \(([^)]*)\)`)

// maxLine is how much of one output line the tracker looks at; the rest of
// a longer line is read and dropped, so the child never blocks on a full
// pipe.
const maxLine = 64 << 10

// read follows one process's go test -v output to its end, whatever it
// holds.
func (t *tracker) read(r io.Reader) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := readLine(br)
		if m := runLine.FindStringSubmatch(line); m != nil {
			t.ran(m[1], m[2]+"/"+m[3]+"/"+m[4], m[5])
		} else if strings.Contains(line, "SKIPPED (envtest)") {
			t.print(strings.TrimSpace(line))
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
}

// ran counts a run's end and prints it.
func (t *tracker) ran(verdict, run, took string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done++
	if verdict == "FAIL" {
		t.failed++
	}
	t.clear()
	width := len(strconv.Itoa(max(t.total, t.done)))
	fmt.Fprintf(t.out, "%*d/%d  %-4s  %s  %s\n", width, t.done, t.total, verdict, run, took)
	switch {
	case t.tty:
		fmt.Fprint(t.out, t.status())
		t.shown = true
	case t.total >= 20 && t.done*10/t.total > t.lastTenth:
		t.lastTenth = t.done * 10 / t.total
		fmt.Fprintln(t.out, t.status())
	}
}

func (t *tracker) print(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
	fmt.Fprintln(t.out, line)
	if t.tty {
		fmt.Fprint(t.out, t.status())
		t.shown = true
	}
}

// clear takes the progress line off a terminal.
func (t *tracker) clear() {
	if t.shown {
		fmt.Fprint(t.out, "\r\033[K")
		t.shown = false
	}
}

// status is the progress line: done, failed, and the time left at the pace
// so far.
func (t *tracker) status() string {
	elapsed := time.Since(t.began)
	s := fmt.Sprintf("progress: %d of %d runs done, %d failed, %v elapsed", t.done, t.total, t.failed, elapsed.Round(time.Second))
	if t.done > 0 && t.done < t.total {
		left := time.Duration(float64(elapsed) / float64(t.done) * float64(t.total-t.done))
		s += fmt.Sprintf(", about %v left", left.Round(time.Second))
	}
	return s
}

// finish takes the progress line off a terminal for good.
func (t *tracker) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
}
