package chaos

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// When says when an injection fires, among the requests (or watch frames)
// its fault targets. All conditions must hold; the zero value fires on every
// match.
type When struct {
	// After and Until bound a window from the start of the run; Until zero
	// means no end.
	After time.Duration `json:"after,omitempty"`
	Until time.Duration `json:"until,omitempty"`
	// Nth fires on the Nth match only (1-based), counted inside the window:
	// "the scaler's first PATCH of web-1" is Nth 1 of a patch target named
	// web-1; with After 8s, its first PATCH from 8 s on.
	Nth int `json:"nth,omitempty"`
	// Count caps the firings. Zero means no cap.
	Count int `json:"count,omitempty"`
	// Probability fires a match with this chance, drawn from the plan's
	// seed. Zero means always.
	Probability float64 `json:"probability,omitempty"`
	// Every repeats a scheduled control-plane fault (one with no Target):
	// it fires at After, After+Every, ... Zero means once.
	Every time.Duration `json:"every,omitempty"`
	// Restarted fires only on the requests of an instance started to
	// replace one that ended (Plan.Restarted).
	Restarted bool `json:"restarted,omitempty"`
}

// Injection is a fault and when it fires.
type Injection struct {
	Fault Fault
	When  When
}

// Firing is one time a fault fired, for the run's history.
type Firing struct {
	At      time.Time
	Fault   string
	Target  Target
	Request string // the request, or the watched object's frame
	// Match numbers the request's matches of this fault: 1 when it fired
	// on the first request with this verb and object (or the first frame
	// of this type for this object), 3 on the third. Draws depend on it,
	// not on the order in which concurrent requests arrive. 0 for firings
	// that no request set off (a partition's window opening, an exit).
	Match   int `json:",omitempty"`
	Outcome string
	// Controller names the controller whose client the fault fired in,
	// when a scenario runs several; empty for the one under test. The
	// injector leaves it empty: whoever records firings per controller
	// sets it.
	Controller string `json:",omitempty"`
}

// Recorder receives every firing. It must be safe for concurrent use.
type Recorder interface{ Record(Firing) }

// Log is a Recorder that keeps the firings in memory.
type Log struct {
	mu      sync.Mutex
	firings []Firing
}

// Record appends f.
func (l *Log) Record(f Firing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.firings = append(l.firings, f)
}

// Firings returns a copy of what was recorded.
func (l *Log) Firings() []Firing {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Firing(nil), l.firings...)
}

// Plan is every injection of one run.
type Plan struct {
	// Seed draws the probabilities: the same seed fires at the same matches.
	Seed uint64
	// Injections, tried in order; the first request fault that fires
	// answers a request.
	Injections []Injection
	// Recorder receives firings. Nil discards them.
	Recorder Recorder
	// Clock measures the windows and runs the schedules. Nil means the
	// real clock.
	Clock clock.Clock
	// OnCrash is called, once and in its own goroutine, when a Crash fires:
	// the harness stops the instance there, without a graceful drain.
	OnCrash func()
	// OnTerminate is called, in its own goroutine, when a Terminate fires:
	// the harness starts the instance's graceful shutdown there.
	OnTerminate func()
	// ControlPlane is what APIServerRestart and Compaction act on; plans
	// with those faults need one.
	ControlPlane ControlPlane
	// Restarted: the plan is an instance's that replaced one that ended;
	// injections with When.Restarted fire only there.
	Restarted bool
	// Shared, when set, makes every injector built from plans with the same
	// injections count matches and firings together and measure windows
	// from one start: one injector per controller instance, and "the first
	// PATCH" means the first of any instance.
	Shared *Shared
}

// Shared is the state injectors of one run share; its zero value is ready.
type Shared struct {
	once  sync.Once
	start time.Time
	state []*injectionState
	views *views
}

// Injector applies a plan; it is shared by every client it is installed in.
type Injector struct {
	plan  Plan
	clock clock.Clock
	start time.Time
	state []*injectionState
	fence fence

	pending sync.WaitGroup // control-plane faults being applied, schedules
	watches openWatches

	// views is what the stale views know (shared by a run's injectors),
	// nil when the plan has none; stale is this instance's windows.
	views *views
	stale staleState
}

type injectionState struct {
	mu      sync.Mutex
	matches int
	fires   int
	seen    map[string]uint64 // matches per request, for the draws
}

// NewInjector validates plan and starts its clock.
func NewInjector(plan Plan) (*Injector, error) {
	var errs []error
	for i, in := range plan.Injections {
		if in.Fault == nil {
			errs = append(errs, fmt.Errorf("injection %d: no fault", i))
			continue
		}
		_, isRequest := in.Fault.(requestFault)
		_, isWatch := in.Fault.(watchFault)
		_, isCrash := in.Fault.(crash)
		_, isTerminate := in.Fault.(terminate)
		_, isControlPlane := in.Fault.(controlPlaneFault)
		sv, isStale := in.Fault.(staleView)
		if isStale {
			if err := sv.check(); err != nil {
				errs = append(errs, fmt.Errorf("injection %d (%s): %w", i, in.Fault.Name(), err))
			}
		}
		if !isRequest && !isWatch && !isCrash && !isTerminate && !isControlPlane && !isStale {
			errs = append(errs, fmt.Errorf("injection %d: %s cannot be injected over HTTP", i, in.Fault.Name()))
		}
		if isControlPlane && plan.ControlPlane == nil {
			errs = append(errs, fmt.Errorf("injection %d: %s needs a control plane (a backend that can restart its API server and compact etcd)", i, in.Fault.Name()))
		}
		w := in.When
		if w.Every != 0 && (!isControlPlane || !in.Fault.Target().IsZero()) {
			errs = append(errs, fmt.Errorf("injection %d (%s): every repeats only a scheduled control-plane fault (one with no target)", i, in.Fault.Name()))
		}
		// !(p >= 0 && p <= 1) refuses NaN too.
		if w.After < 0 || w.Until < 0 || w.Nth < 0 || w.Count < 0 || w.Every < 0 || !(w.Probability >= 0 && w.Probability <= 1) {
			errs = append(errs, fmt.Errorf("injection %d (%s): negative bound or probability outside [0, 1]", i, in.Fault.Name()))
		}
		if w.Until > 0 && w.Until <= w.After {
			errs = append(errs, fmt.Errorf("injection %d (%s): window ends (%v) before it starts (%v)", i, in.Fault.Name(), w.Until, w.After))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("chaos: invalid plan: %w", err)
	}
	if plan.Clock == nil {
		plan.Clock = clock.RealClock{}
	}
	inj := &Injector{plan: plan, clock: plan.Clock, start: plan.Clock.Now(), stale: staleState{windows: map[int]*window{}}}
	for range plan.Injections {
		inj.state = append(inj.state, &injectionState{seen: map[string]uint64{}})
	}
	if hasStaleViews(plan.Injections) {
		inj.views = &views{}
	}
	if sh := plan.Shared; sh != nil {
		sh.once.Do(func() { sh.start, sh.state, sh.views = inj.start, inj.state, inj.views })
		if len(sh.state) != len(inj.state) {
			return nil, fmt.Errorf("chaos: a shared plan must have the same injections (%d, not %d)", len(sh.state), len(inj.state))
		}
		inj.start, inj.state, inj.views = sh.start, sh.state, sh.views
	}
	return inj, nil
}

// fires counts a match of injection i by the request (or watched object)
// key and reports whether it fires: the match's number for that key (1 for
// its first match), or 0 when it does not fire.
func (inj *Injector) fires(i int, key string) int {
	w := inj.plan.Injections[i].When
	if w.Restarted && !inj.plan.Restarted {
		return 0 // not a match: nth counts the replacements' requests
	}
	s := inj.state[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	// The draw depends on the seed, the injection, the request and how
	// many times that request matched before, not on the order in which
	// concurrent workers' requests arrive: the k-th PATCH of web-1 meets
	// the same draw in every run with the seed.
	s.seen[key]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", i, key, s.seen[key])
	draw := rand.New(rand.NewPCG(inj.plan.Seed, h.Sum64())).Float64()
	elapsed := inj.clock.Since(inj.start)
	if elapsed < w.After || w.Until > 0 && elapsed >= w.Until {
		return 0
	}
	// Nth counts the matches inside the window: "the first PATCH after
	// 8s" whatever came before.
	s.matches++
	switch {
	case w.Nth > 0 && s.matches != w.Nth:
		return 0
	case w.Count > 0 && s.fires >= w.Count:
		return 0
	case w.Probability > 0 && draw >= w.Probability:
		return 0
	}
	s.fires++
	return int(s.seen[key])
}

// firings is how many times injection i fired.
func (inj *Injector) firings(i int) int {
	s := inj.state[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fires
}

// record reports a firing that happened at at, on the match-th match of
// request.
func (inj *Injector) record(i int, at time.Time, request string, match int, outcome string) {
	if inj.plan.Recorder == nil {
		return
	}
	f := inj.plan.Injections[i].Fault
	inj.plan.Recorder.Record(Firing{At: at, Fault: f.Name(), Target: f.Target(), Request: request, Match: match, Outcome: outcome})
}
