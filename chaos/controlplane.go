package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ControlPlane is what the control-plane faults act on: the backend's API
// server and etcd. The envtest backend has both.
type ControlPlane interface {
	// RestartAPIServer stops the API server and starts it again on the same
	// address and storage.
	RestartAPIServer(ctx context.Context) error
	// Compact compacts the storage's history up to its current revision.
	Compact(ctx context.Context) error
}

// APIServerRestart restarts the API server (Plan.ControlPlane): every watch
// of every client breaks, requests are refused while it is down, and
// watches resume against a watch cache that starts afresh, as after a
// control-plane upgrade.
//
// Like every control-plane fault it fires in one of two ways. With a Target
// it is a trigger: right after the matching request of the client it is
// installed in ("restart the API server after the scaler's first PATCH").
// With no Target it is a schedule: at When.After from the start of the run
// (Injector.Start), again every When.Every if set, up to When.Count firings
// and before When.Until.
func APIServerRestart(t Target) Fault { return apiServerRestart{t: t} }

type apiServerRestart struct {
	controlPlaneOnly
	t Target
}

func (f apiServerRestart) Name() string   { return FaultAPIServerRestart }
func (f apiServerRestart) Target() Target { return f.t }
func (f apiServerRestart) plane() Plane   { return Plane{RestartsAPIServer: true} }
func (f apiServerRestart) apply(ctx context.Context, cp ControlPlane, _ *Injector) (string, error) {
	began := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("API server restarted in %v", time.Since(began).Round(time.Millisecond)), nil
}

// Compaction compacts the storage's history (Plan.ControlPlane) and then
// ends the open watch streams of the client it is installed in, as a watch
// timeout does. Open watches survive a compaction, so they are ended to make
// the client watch again from the resourceVersion it last saw, which is now
// compacted: the 410 it meets comes from the server, not from this package.
// An API server whose watch cache still holds that resourceVersion answers
// from the cache instead (see the envtest backend's Options.NoWatchCache).
// It fires as APIServerRestart does.
func Compaction(t Target) Fault { return compaction{t: t} }

type compaction struct {
	controlPlaneOnly
	t Target
}

func (f compaction) Name() string   { return FaultCompaction }
func (f compaction) Target() Target { return f.t }
func (f compaction) plane() Plane   { return Plane{NeedsNoWatchCache: true} }
func (f compaction) apply(ctx context.Context, cp ControlPlane, inj *Injector) (string, error) {
	if err := cp.Compact(ctx); err != nil {
		return "", err
	}
	n := inj.watches.breakAll(true, everyWatch, nil)
	return fmt.Sprintf("storage compacted; %d open watch streams broken", n), nil
}

// controlPlaneFault acts on the server, not on one request.
type controlPlaneFault interface {
	Fault
	apply(ctx context.Context, cp ControlPlane, inj *Injector) (outcome string, err error)
	plane() Plane
}

// Plane is what a control-plane fault does to the plane, for the harness
// that schedules it, picks the plane it runs on and judges the run.
type Plane struct {
	// RestartsAPIServer: the API server goes away and comes back. Its
	// authorizer refuses requests until its caches of roles and bindings
	// have synced, so a 401 or 403 soon after is the server's, not the
	// controller's; and the plane must be the run's alone.
	RestartsAPIServer bool
	// NeedsNoWatchCache: the fault is felt only where watches are served
	// from storage rather than from the API server's watch cache.
	NeedsNoWatchCache bool
}

// PlaneOf says whether f acts on the control plane (Plan.ControlPlane)
// rather than on requests, and what it does to it.
func PlaneOf(f Fault) (Plane, bool) {
	cp, ok := f.(controlPlaneFault)
	if !ok {
		return Plane{}, false
	}
	return cp.plane(), true
}

// EndsInstance says whether the fault of that name ends the controller
// instance it fires in (a crash, a SIGTERM), so that a run restarts it.
func EndsInstance(name string) bool {
	f, ok := faultNamed(name)
	if !ok {
		return false
	}
	_, ends := f.(interface{ endsInstance() })
	return ends
}

// faultNamed is a fault of that name with parameters any fault accepts.
func faultNamed(name string) (Fault, bool) {
	build, ok := registry[name]
	if !ok {
		return nil, false
	}
	f, err := build(Spec{Fault: name, RetryAfter: 1, Delay: time.Second})
	return f, err == nil
}

// PlaneOfFault is PlaneOf for a fault by its registered name; false for
// a fault of requests or a name no fault has.
func PlaneOfFault(name string) (Plane, bool) {
	f, ok := faultNamed(name)
	if !ok {
		return Plane{}, false
	}
	return PlaneOf(f)
}

// controlPlaneOnly is embedded by the control-plane faults: they need a
// Plan.ControlPlane, which a fake clientset has not.
type controlPlaneOnly struct{}

func (controlPlaneOnly) Available(l Layer) error {
	if l == Clientset {
		return errors.New("the fake clientset has no API server to restart and no etcd to compact")
	}
	return nil
}

// applyTimeout bounds one control-plane fault; a restart takes seconds.
const applyTimeout = 2 * time.Minute

// fireControlPlane applies injection i, recording it as fired at at. It
// runs in its own goroutine, so the request that triggered it returns
// first.
func (inj *Injector) fireControlPlane(i int, at time.Time, request string, match int) {
	inj.pending.Add(1)
	go func() {
		defer inj.pending.Done()
		ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
		defer cancel()
		f := inj.plan.Injections[i].Fault.(controlPlaneFault)
		outcome, err := f.apply(ctx, inj.plan.ControlPlane, inj)
		if err != nil {
			outcome = "failed: " + err.Error()
		}
		inj.record(i, at, request, match, outcome)
	}()
}

// Start runs the scheduled control-plane faults (those with no Target), and
// breaks the open watches a Partition targets when its window opens, until
// ctx ends. Call it once, at the start of the run; a plan without such
// faults needs no Start.
func (inj *Injector) Start(ctx context.Context) {
	for i, in := range inj.plan.Injections {
		if p, ok := in.Fault.(partition); ok && in.When.After > 0 {
			inj.pending.Add(1)
			go func() {
				defer inj.pending.Done()
				inj.partitionStarts(ctx, i, p)
			}()
			continue
		}
		if _, ok := in.Fault.(controlPlaneFault); !ok || !in.Fault.Target().IsZero() {
			continue
		}
		inj.pending.Add(1)
		go func() {
			defer inj.pending.Done()
			inj.schedule(ctx, i)
		}()
	}
}

// partitionStarts breaks the open watch streams a partition targets when its
// window opens: a partition kills the connections that are up, not only
// the ones asked for later.
func (inj *Injector) partitionStarts(ctx context.Context, i int, p partition) {
	select {
	case <-ctx.Done():
		return
	case <-inj.clock.After(max(inj.plan.Injections[i].When.After-inj.clock.Since(inj.start), 0)):
	}
	// Recorded before the streams break, so the history has the cause
	// before the clients' reactions to it.
	inj.watches.breakAll(false, func(r Request) bool { return p.t.Matches(r) }, func(n int) {
		inj.record(i, inj.clock.Now(), "open watches", 0, fmt.Sprintf("partition began: %d open watch streams broken", n))
	})
}

func (inj *Injector) schedule(ctx context.Context, i int) {
	w := inj.plan.Injections[i].When
	next := w.After
	for {
		wait := next - inj.clock.Since(inj.start)
		select {
		case <-ctx.Done():
			return
		case <-inj.clock.After(max(wait, 0)):
		}
		if w.Until > 0 && inj.clock.Since(inj.start) >= w.Until {
			return
		}
		if n := inj.fires(i, "schedule"); n > 0 {
			inj.fireControlPlane(i, inj.clock.Now(), "schedule", n)
		}
		if w.Every <= 0 || (w.Count > 0 && inj.firings(i) >= w.Count) {
			return
		}
		next += w.Every
	}
}

// Wait blocks until every control-plane fault that fired has been applied
// and recorded, and, once ctx passed to Start has ended, until the schedules
// have stopped.
func (inj *Injector) Wait() { inj.pending.Wait() }

// openWatches are the watch streams open through an injector, for
// Compaction and Partition to break.
type openWatches struct {
	mu     sync.Mutex
	bodies map[*trackedBody]Request
	fakes  map[*proxyWatch]Request
}

func (o *openWatches) track(body io.ReadCloser, r Request) io.ReadCloser {
	b := &trackedBody{ReadCloser: body, owner: o}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bodies == nil {
		o.bodies = map[*trackedBody]Request{}
	}
	o.bodies[b] = r
	return b
}

func (o *openWatches) trackFake(p *proxyWatch, r Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fakes == nil {
		o.fakes = map[*proxyWatch]Request{}
	}
	o.fakes[p] = r
}

func (o *openWatches) untrackFake(p *proxyWatch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.fakes, p)
}

// breakAll ends the open streams that match: cleanly, as the server ends a
// watch that timed out (the client watches again from the resourceVersion
// it last saw), or not, as a connection that died. announce, when set, is
// told how many match before the first breaks.
func (o *openWatches) breakAll(clean bool, match func(Request) bool, announce func(n int)) int {
	o.mu.Lock()
	var bodies []*trackedBody
	for b, r := range o.bodies {
		if match(r) {
			bodies = append(bodies, b)
		}
	}
	var fakes []*proxyWatch
	for p, r := range o.fakes {
		if match(r) {
			fakes = append(fakes, p)
		}
	}
	o.mu.Unlock()
	if announce != nil {
		announce(len(bodies) + len(fakes))
	}
	for _, b := range bodies {
		b.ended.Store(clean)
		_ = b.Close()
	}
	for _, p := range fakes {
		p.cut()
	}
	return len(bodies) + len(fakes)
}

func everyWatch(Request) bool { return true }

type trackedBody struct {
	io.ReadCloser
	owner *openWatches
	ended atomic.Bool
	once  sync.Once
	err   error
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.ended.Load() {
		return n, io.EOF
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.once.Do(func() {
		b.owner.mu.Lock()
		delete(b.owner.bodies, b)
		b.owner.mu.Unlock()
		b.err = b.ReadCloser.Close()
	})
	return b.err
}
