package scenariotest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/mod/semver"

	"github.com/converge-lab/converge/scenarios/internal/bubble"
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

// goroutine is one goroutine of a bubble's dump.
type goroutine = bubble.Goroutine

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

var versionRE = regexp.MustCompile(`@(v[^/]+)/`)

// known says which known leak g is, and of which version of its module,
// when it is one.
func known(g goroutine) (knownLeak, string, bool) {
	for _, k := range knownLeaks {
		for i, fn := range g.Funcs {
			if !slices.ContainsFunc(k.frames, func(f string) bool { return strings.HasPrefix(fn, f) }) {
				continue
			}
			version := ""
			if m := versionRE.FindStringSubmatch(g.Files[i]); m != nil && strings.Contains(g.Files[i], k.module+"@") {
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

// leakReport sorts the goroutines a dead bubble kept into those of known
// library leaks (a note each kind) and the rest (described, alike ones
// counted once).
func leakReport(gs []goroutine) (rest []string, notes []string) {
	counts := map[string]int{}
	var order []string
	noted := map[string]bool{}
	for _, g := range gs {
		if k, version, ok := known(g); ok {
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
		gs := bubble.Of(int(id.Load()))
		var now []string
		blocked := len(gs) > 0
		for _, g := range gs {
			now = append(now, g.Key())
			blocked = blocked && g.Blocked()
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
