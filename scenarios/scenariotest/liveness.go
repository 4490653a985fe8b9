package scenariotest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/sim/fake"
)

// liveReferences is how many fault-free references a world's liveness is
// first judged against; explore.MoreReferences adds to them where they
// disagree, and a run about to be found late is judged again against
// confirmReferences of them, so that a controller's own random delays,
// which a few references may happen to agree on, are learnt before a run
// is blamed for drawing a longer one.
//
// A run still late against those is run again, confirmRuns times with its
// seed: a fault's draws follow the seed, so a dropped key is dropped again,
// while a delay the controller draws for itself is drawn anew. It is a
// finding only when every run is late.
const (
	liveReferences    = 2
	confirmReferences = 8
	confirmRuns       = 3
)

// Liveness judges the runs of fault profiles on a virtual backend by when
// they converged (explore.Late): a run that converged much later than
// fault-free runs of the same world, after its controller had sent
// nothing for longer than they ever did, dropped work that a resync or an
// unrelated event brought back, however far its goal's deadline was. The
// references are learnt once per world (the scenario without its faults,
// with its controller settings) and controller, and shared by the
// profiles that run in that world, on the fake backend and the
// invocation's seed. Other backends run in real time, where references
// would double a run's wall time: their runs are judged by the goal alone.
// RunScenarios and Catches judge so; a test of its own that runs fault
// profiles' scenarios with RunFake judges them with one Liveness for all
// its runs.
type Liveness struct {
	seed   uint64
	others map[string]scenarios.Controller

	mu     sync.Mutex
	worlds map[string]*world
}

// world is the references of one world and controller.
type world struct {
	mu   sync.Mutex
	refs []*reports.Result
	// why there are none to judge against, when there are none.
	why string
}

// NewLiveness judges runs against references run with seeds from seed
// on, beside others (Options.Others).
func NewLiveness(seed uint64, others map[string]scenarios.Controller) *Liveness {
	return &Liveness{seed: seed, others: others, worlds: map[string]*world{}}
}

// underProfile: s runs some fault profile's faults.
func underProfile(s *scenarios.Scenario) bool {
	return slices.ContainsFunc(s.Faults, func(f chaos.Spec) bool { return f.Profile != "" })
}

// Judge adds a liveness finding to res, a run of s with controller c on
// fake, when s runs a fault profile and res converged late, and fails the
// run. The finding depends on the references, not on res's history
// alone: scenarios.Rejudge does not give it again. The references run as
// t's; when one fails or cannot be run, t logs why and res is not judged.
func (l *Liveness) Judge(t *testing.T, s *scenarios.Scenario, c scenarios.Controller, res *reports.Result) {
	t.Helper()
	if l == nil || !underProfile(s) || res.Error != "" || !res.Converged || len(res.History.Faults) == 0 {
		return
	}
	base := explore.WithoutFaults(s)
	w := l.world(base, c)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refs == nil && w.why == "" {
		w.refs, w.why = l.learn(t, base, c, nil, liveReferences, true)
	}
	if w.why != "" {
		t.Logf("note: liveness not judged: %s", w.why)
		return
	}
	if _, late := explore.Late(w.refs, res); !late {
		return
	}
	if len(w.refs) < confirmReferences {
		w.refs, w.why = l.learn(t, base, c, w.refs, confirmReferences, false)
		if w.why != "" {
			t.Logf("note: liveness not judged: %s", w.why)
			return
		}
	}
	d, late := explore.Late(w.refs, res)
	if !late {
		return
	}
	for i := range confirmRuns {
		again := l.runFake(t, s, c, res.Seed)
		if _, late := explore.Late(w.refs, again); !late {
			t.Logf("note: %s, seed %d, converged late once and on time when run again (%d of %d): the controller's own timing, not a finding",
				s.Name, res.Seed, i+1, confirmRuns)
			return
		}
	}
	start := res.History.Start
	if start.IsZero() {
		start = res.Started
	}
	f := reports.Finding{Check: reports.CheckLiveness, Kind: reports.KindLiveness, At: start.Add(time.Duration(res.TimeToConverge)), Detail: d.Detail}
	res.Findings = append(res.Findings, f)
	res.Reasons = append(res.Reasons, f.Sentence(res.Started))
	res.Pass = false
}

// world is the references of base, run by c; one per world and
// controller for the whole call.
func (l *Liveness) world(base *scenarios.Scenario, c scenarios.Controller) *world {
	k := *base
	k.Name, k.Description, k.Catches = "", "", ""
	data, err := json.Marshal(&k)
	key := c.Name() + "\x00" + string(data)
	if err != nil {
		key = c.Name() + "\x00" + base.Name
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.worlds[key]
	if w == nil {
		w = &world{}
		l.worlds[key] = w
	}
	return w
}

// learn runs references of base until there are n of them, and with more
// until they agree (explore.MoreReferences), and returns them, or why
// they cannot be judged against: one failed, or could not be run.
func (l *Liveness) learn(t *testing.T, base *scenarios.Scenario, c scenarios.Controller, refs []*reports.Result, n int, more bool) ([]*reports.Result, string) {
	t.Helper()
	runs := explore.References(base, l.seed, n)[len(refs):]
	for len(runs) > 0 {
		for _, ref := range runs {
			res := l.runFake(t, ref.Scenario, c, ref.Seed)
			switch {
			case res.Error != "":
				return nil, fmt.Sprintf("the fault-free reference (seed %d) could not be run: %s", ref.Seed, res.Error)
			case !res.Pass:
				return nil, fmt.Sprintf("the fault-free reference (seed %d) failed: %s", ref.Seed, slices.Concat(res.Reasons, []string{""})[0])
			}
			refs = append(refs, res)
		}
		runs = nil
		if more {
			runs = explore.MoreReferences(base, l.seed, n, refs, explore.Masks{})
		}
	}
	return refs, ""
}

// runFake runs s with c on fake, with the invocation's wall-clock limit.
func (l *Liveness) runFake(t *testing.T, s *scenarios.Scenario, c scenarios.Controller, seed uint64) *reports.Result {
	t.Helper()
	opts := scenarios.Options{Backend: fake.Kind{}, Seed: seed, Controller: c, Others: l.others}
	var stop func()
	opts.Limit, stop = scenarios.WallClockLimit(current(t).RunTimeout)
	defer stop()
	return RunFake(t, s, opts)
}
