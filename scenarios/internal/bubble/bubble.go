// Package bubble reads the goroutines of a testing/synctest bubble from a
// dump of the process's goroutines: which bubble the caller is in, which
// goroutines share it, where each is blocked and who started it.
//
// A dump stops the world while it lists every goroutine of the process, so
// callers look rarely: once at the end of a run, or once a second.
package bubble

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Goroutine is one goroutine of a dump: its header's state and its
// frames.
type Goroutine struct {
	State  string   // "chan send (durable)"
	Funcs  []string // function names, innermost first, created-by last
	Files  []string // the file:line of each
	Header string   // "goroutine 7 [chan send (durable), synctest bubble 3]:"
}

// ID reads the id of the synctest bubble the calling goroutine is in from
// its own stack header ("goroutine 7 [running, synctest bubble 3]:"); 0
// outside one.
func ID() int {
	_, id := self()
	return id
}

// self is the calling goroutine's number and bubble.
func self() (string, int) {
	buf := make([]byte, 256)
	buf = buf[:runtime.Stack(buf, false)]
	header, _, _ := bytes.Cut(buf, []byte("\n"))
	number := ""
	if f := strings.Fields(string(header)); len(f) > 1 {
		number = f[1]
	}
	m := bubbleRE.FindSubmatch(header)
	if m == nil {
		return number, 0
	}
	id, _ := strconv.Atoi(string(m[1]))
	return number, id
}

var (
	bubbleRE = regexp.MustCompile(`, synctest bubble (\d+)\]:$`)
	headerRE = regexp.MustCompile(`^goroutine \d+ \[([^,\]]*)`)
)

// Of lists the goroutines of bubble id in a dump of them all, but for the
// one that runs the bubble and waits for it to end (outside it).
func Of(id int) []Goroutine {
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
	return parse(string(buf), id)
}

// parse reads the goroutines of bubble id from dump.
func parse(dump string, id int) []Goroutine {
	suffix := fmt.Sprintf(", synctest bubble %d]:", id)
	var out []Goroutine
	for block := range strings.SplitSeq(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 || !strings.HasSuffix(lines[0], suffix) {
			continue
		}
		g := Goroutine{Header: lines[0]}
		if m := headerRE.FindStringSubmatch(lines[0]); m != nil {
			g.State = m[1]
		}
		if strings.HasPrefix(g.State, "synctest.Run") {
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
			g.Funcs = append(g.Funcs, fn)
			g.Files = append(g.Files, file)
		}
		out = append(out, g)
	}
	return out
}

// Number is g's goroutine number, as its header gives it.
func (g Goroutine) Number() string {
	if f := strings.Fields(g.Header); len(f) > 1 {
		return f[1]
	}
	return ""
}

// String is where g is blocked: its state and innermost frame.
func (g Goroutine) String() string {
	if len(g.Funcs) == 0 {
		return g.Header
	}
	s := fmt.Sprintf("%s in %s (%s)", g.State, g.Funcs[0], baseFile(g.Files[0]))
	if n := len(g.Funcs); n > 1 {
		s += ", started by " + g.Funcs[n-1]
	}
	return s
}

func baseFile(fileLine string) string {
	if i := strings.LastIndex(fileLine, "/"); i >= 0 {
		return fileLine[i+1:]
	}
	return fileLine
}

// Blocked says whether g waits for something rather than runs or is in a
// system call: blocked for good in synctest's sense, waiting for a lock,
// or on a channel or select that something outside the bubble could end.
func (g Goroutine) Blocked() bool {
	for _, busy := range busyStates {
		if strings.HasPrefix(g.State, busy) {
			return false
		}
	}
	return g.State != ""
}

// busyStates are the states of a goroutine that runs, or waits for the
// runtime rather than for another goroutine: it goes on by itself, so a
// bubble with one in it is not stuck. A goroutine that allocates while
// the garbage collector marks may wait for it ("GC assist wait") for a
// while on a loaded machine.
var busyStates = []string{
	"running", "runnable", "syscall", "preempted",
	"GC ", "garbage collection", "wait for GC cycle", "stopping the world",
	"flushing proc caches", "debug call", "dumping heap", "trace ", "page trace flush",
}

// Key is g's number, state and innermost frame: what stays the same from
// one look to the next while g stays where it is (the header's minutes
// blocked change).
func (g Goroutine) Key() string {
	inner := ""
	if len(g.Funcs) > 0 {
		inner = g.Funcs[0]
	}
	return g.Number() + " " + g.State + " " + inner
}

// Others lists the goroutines of the caller's bubble but the caller and
// synctest.Test's own, which waits for the function it was given to
// return; nil outside a bubble.
func Others() []Goroutine {
	me, id := self()
	var out []Goroutine
	for _, g := range Of(id) {
		if g.Number() != me && (len(g.Funcs) == 0 || !strings.HasPrefix(g.Funcs[0], "testing/synctest.")) {
			out = append(out, g)
		}
	}
	return out
}

// Linger lets the caller's bubble run on in virtual time, up to grace,
// until the caller is the only goroutine left in it: the goroutines a
// stopped program leaves to wind down (a backoff it waits out, a process
// it waits for) end as they would in real time, instead of being left
// when the bubble's main goroutine returns, after which synctest advances
// no clock and calls them deadlocked. It returns those still there at the
// end of the grace, or when they stop its clock (all blocked, some where
// synctest does not count them blocked for good: a lock another of them
// holds) and stay so for a third of a second of wall time; nil at once
// outside a bubble. It looks after growing sleeps, so a few dumps at most.
func Linger(grace time.Duration) []Goroutine {
	if ID() == 0 {
		return nil
	}
	step := 100 * time.Millisecond
	for waited := time.Duration(0); ; {
		left := Others()
		if len(left) == 0 || waited >= grace {
			return left
		}
		if Stuck(left) {
			if left, still := stillStuck(left); still {
				return left
			}
			continue // one of them moved: look again
		}
		d := min(step, grace-waited)
		time.Sleep(d)
		waited += d
		step *= 2
	}
}

// stillStuck looks at the caller's bubble again over about a third of a
// second of wall time, while its clock stands still, and says whether
// the goroutines stuck in gs stayed as they were: stuck for good, not a
// moment's wait that the next look would not see (a lock whose holder
// the runtime paused, a channel something outside the bubble is about to
// send on). It returns the last look.
func stillStuck(gs []Goroutine) ([]Goroutine, bool) {
	for d := 10 * time.Millisecond; d <= 160*time.Millisecond; d *= 2 {
		wallPause(d)
		now := Others()
		if !Stuck(now) || !slices.EqualFunc(now, gs, func(a, b Goroutine) bool { return a.Key() == b.Key() }) {
			return now, false
		}
		gs = now
	}
	return gs, true
}

// wall sleeps in wall time for a goroutine in a bubble, where time.Sleep
// is virtual: a goroutine started at init, outside every bubble, sleeps
// for it. The caller waits on channels of no bubble, which keeps its
// bubble's clock still while it does.
var wall = struct {
	sync.Mutex
	sleep chan time.Duration
	woke  chan struct{}
}{sleep: make(chan time.Duration), woke: make(chan struct{})}

func init() {
	go func() {
		for d := range wall.sleep {
			time.Sleep(d)
			wall.woke <- struct{}{}
		}
	}()
}

// wallPause is wallSleep, but where a test steps in.
var wallPause = wallSleep

func wallSleep(d time.Duration) {
	wall.Lock()
	defer wall.Unlock()
	wall.sleep <- d
	<-wall.woke
}

// kept holds, by bubble, what its main goroutine handed over before it
// lingered (Keep).
var kept sync.Map

// Keep hands v, what the caller's bubble was run for, to whoever waits on
// the bubble from outside (Kept), before the caller lingers: a linger that
// a stopped clock never lets return does not lose it. Nothing outside a
// bubble.
func Keep(v any) {
	if id := ID(); id != 0 {
		kept.Store(id, v)
	}
}

// Kept takes what bubble id's main goroutine kept, if it did.
func Kept(id int) (any, bool) { return kept.LoadAndDelete(id) }

// Stuck says whether gs, the goroutines of a bubble but one, would keep
// its clock from moving: none of them runs, and some are blocked where
// synctest does not count them blocked for good (a lock, a channel from
// outside the bubble), so a sleep in the bubble might never return.
func Stuck(gs []Goroutine) bool {
	durable := true
	for _, g := range gs {
		if !g.Blocked() {
			return false
		}
		durable = durable && strings.Contains(g.State, "(durable)")
	}
	return !durable
}
