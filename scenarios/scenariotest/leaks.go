package scenariotest

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/mod/semver"
)

// A knownLeak is a goroutine a library leaves blocked after its owner
// stopped, in the library's versions before Fixed: a bug of the library,
// which a controller built on it cannot mend, so never a finding against
// that controller. The result says it was left unjudged.
type knownLeak struct {
	module string   // its module path
	fixed  string   // the first version without it
	frames []string // functions on its stacks, as a goroutine dump names them
	what   string   // what it is, for the note
}

var knownLeaks = []knownLeak{{
	module: "sigs.k8s.io/controller-runtime",
	fixed:  "v0.25.0",
	frames: []string{
		"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems",
		// waiting for the lock the one above holds
		"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleAddBuffer",
	},
	what: "the priority queue hands a ready item to a worker through an unbuffered channel, holding its lock, and once the queue has shut down waits for ever for a worker to take it",
}}

// goroutine is one goroutine of a dump: its header's state and its frames.
type goroutine struct {
	state  string   // "chan send (durable)"
	funcs  []string // function names, innermost first, created-by last
	files  []string // the file:line of each
	header string
}

// bubbleOf reads the id of the synctest bubble the calling goroutine is
// in from its own stack header ("goroutine 7 [running, synctest bubble
// 3]:"); 0 outside one.
func bubbleOf() int {
	buf := make([]byte, 256)
	buf = buf[:runtime.Stack(buf, false)]
	header, _, _ := bytes.Cut(buf, []byte("\n"))
	m := bubbleRE.FindSubmatch(header)
	if m == nil {
		return 0
	}
	id, _ := strconv.Atoi(string(m[1]))
	return id
}

var (
	bubbleRE  = regexp.MustCompile(`, synctest bubble (\d+)\]:$`)
	headerRE  = regexp.MustCompile(`^goroutine \d+ \[([^,\]]*)`)
	versionRE = regexp.MustCompile(`@(v[^/]+)/`)
)

// inBubble lists the goroutines of bubble id in a dump of them all.
func inBubble(id int) []goroutine {
	if id == 0 {
		return nil
	}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	suffix := fmt.Sprintf(", synctest bubble %d]:", id)
	var out []goroutine
	for block := range strings.SplitSeq(string(buf), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 || !strings.HasSuffix(lines[0], suffix) {
			continue
		}
		g := goroutine{header: lines[0]}
		if m := headerRE.FindStringSubmatch(lines[0]); m != nil {
			g.state = m[1]
		}
		if strings.HasPrefix(g.state, "synctest.Run") {
			continue // the goroutine that runs the bubble, waiting for it
		}
		for i := 1; i+1 < len(lines); i += 2 {
			if strings.HasPrefix(lines[i], "...") { // "...additional frames elided..."
				i--
				continue
			}
			fn := strings.TrimPrefix(lines[i], "created by ")
			if j := strings.LastIndex(fn, " in goroutine "); j > 0 {
				fn = fn[:j]
			} else if strings.HasSuffix(fn, ")") {
				if j := strings.LastIndex(fn, "("); j > 0 {
					fn = fn[:j]
				}
			}
			file := strings.TrimSpace(lines[i+1])
			if j := strings.LastIndex(file, " +0x"); j > 0 {
				file = file[:j]
			}
			g.funcs = append(g.funcs, fn)
			g.files = append(g.files, file)
		}
		out = append(out, g)
	}
	return out
}

// known says which known leak g is, and of which version of its module,
// when it is one.
func (g goroutine) known() (knownLeak, string, bool) {
	for _, k := range knownLeaks {
		for i, fn := range g.funcs {
			if !slices.ContainsFunc(k.frames, func(f string) bool { return strings.HasPrefix(fn, f) }) {
				continue
			}
			version := ""
			if m := versionRE.FindStringSubmatch(g.files[i]); m != nil && strings.Contains(g.files[i], k.module+"@") {
				version = m[1]
			}
			if version != "" && semver.IsValid(version) && semver.Compare(version, k.fixed) >= 0 {
				continue // fixed there: this is something else
			}
			return k, version, true
		}
	}
	return knownLeak{}, "", false
}

// String is where g is blocked: its state and innermost frame.
func (g goroutine) String() string {
	if len(g.funcs) == 0 {
		return g.header
	}
	s := fmt.Sprintf("%s in %s (%s)", g.state, g.funcs[0], baseFile(g.files[0]))
	if n := len(g.funcs); n > 1 {
		s += ", started by " + g.funcs[n-1]
	}
	return s
}

func baseFile(fileLine string) string {
	if i := strings.LastIndex(fileLine, "/"); i >= 0 {
		return fileLine[i+1:]
	}
	return fileLine
}

// leakReport sorts the goroutines a dead bubble kept into those of known
// library leaks (a note each kind) and the rest (described, alike ones
// counted once).
func leakReport(gs []goroutine) (rest []string, notes []string) {
	counts := map[string]int{}
	var order []string
	noted := map[string]bool{}
	for _, g := range gs {
		if k, version, ok := g.known(); ok {
			if !noted[k.module+k.fixed] {
				noted[k.module+k.fixed] = true
				of := k.module
				if version != "" {
					of += " " + version
				}
				notes = append(notes, fmt.Sprintf("not judged: a goroutine of %s outlived the run, a leak of that module fixed in %s (%s); it is not the controller's", of, k.fixed, k.what))
			}
			continue
		}
		d := g.String()
		if counts[d] == 0 {
			order = append(order, d)
		}
		counts[d]++
	}
	for _, d := range order {
		if n := counts[d]; n > 1 {
			d = fmt.Sprintf("%d goroutines: %s", n, d)
		}
		rest = append(rest, d)
	}
	return rest, notes
}

// How often awaitBubble looks at a bubble that has not ended, and how long
// its goroutines may stay as they are, all blocked, before it gives up on
// it. A look stops the world to list every goroutine, so not often.
const (
	stuckPoll  = time.Second
	stuckAfter = 10 * time.Second
)

// errStuck is a bubble that cannot go on: all its goroutines blocked, some
// where synctest does not count them blocked for good (a lock another of
// them holds, a channel from outside the bubble).
type errStuck struct{ goroutines []goroutine }

func (e *errStuck) Error() string {
	return fmt.Sprintf("%d goroutines stayed blocked for %v of wall time, some where synctest cannot tell they are blocked for good (a lock another holds, a channel from outside the bubble)", len(e.goroutines), stuckAfter)
}

// awaitBubble waits for the bubble (its id in id, once it has one) to end,
// and gives up on it when all its goroutines have stayed blocked,
// unchanged, for stuckAfter of wall time: wall time, as the bubble's clock
// stands still while any of them waits for a mutex. Nil when it ended.
func awaitBubble(id *atomic.Int64, ended <-chan struct{}) *errStuck {
	tick := time.NewTicker(stuckPoll)
	defer tick.Stop()
	var last []string
	var since time.Time
	for {
		select {
		case <-ended:
			return nil
		case <-tick.C:
		}
		gs := inBubble(int(id.Load()))
		var now []string
		blocked := len(gs) > 0
		for _, g := range gs {
			now = append(now, g.key())
			blocked = blocked && g.blocked()
		}
		if !blocked || !slices.Equal(now, last) {
			last, since = now, time.Now()
			continue
		}
		if time.Since(since) >= stuckAfter {
			return &errStuck{goroutines: gs}
		}
	}
}

// blocked says whether g waits for something rather than runs or is in a
// system call: blocked for good in synctest's sense, waiting for a lock,
// or on a channel or select that something outside the bubble could end
// (nothing does once the run is over).
func (g goroutine) blocked() bool {
	for _, busy := range []string{"running", "runnable", "syscall", "preempted"} {
		if strings.HasPrefix(g.state, busy) {
			return false
		}
	}
	return g.state != ""
}

// key is g's number, state and innermost frame: what awaitBubble compares
// from one look to the next (the header's minutes blocked change).
func (g goroutine) key() string {
	id := ""
	if f := strings.Fields(g.header); len(f) > 1 {
		id = f[1]
	}
	inner := ""
	if len(g.funcs) > 0 {
		inner = g.funcs[0]
	}
	return id + " " + g.state + " " + inner
}
