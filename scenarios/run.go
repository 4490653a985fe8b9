package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/internal/bubble"
	"github.com/converge-lab/converge/scenarios/internal/workqueues"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/kwok"
	"github.com/converge-lab/converge/sim/world"
)

// Options say how to run a scenario.
type Options struct {
	// Backend is the kind of backend the run is on: one of the registry's
	// (backends.Named: fake, envtest, cluster) or one of the caller's own
	// (envtest.Kind on a control plane of its own, sim.Given(b) for a
	// backend built by hand). Required.
	Backend sim.Kind
	// Setup is the invocation's, for the kinds that read it (the cluster
	// kind's kubeconfig or kwok cluster, control planes shared by runs);
	// nil means none.
	Setup *sim.Setup
	// Seed draws the fault probabilities and the world's randomness.
	Seed uint64
	// Controller under test. Required, unless the scenario names a
	// command to run out of process.
	Controller Controller
	// Others are the Go values of the scenario's others
	// (Scenario.Others), by name: each runs beside Controller on the same
	// backend, as its own identity, through its own fault injectors. One
	// whose spec gives a command needs none; a name the scenario's others
	// do not have is an error.
	Others map[string]Controller
	// Replay is the command that replays this run, recorded in the result.
	Replay string
	// Log receives the output of controllers run out of process. Nil
	// discards it.
	Log io.Writer
	// Limit, when it returns an error, ends the run as an error with that
	// message: a wall-clock limit per run (see WallClockLimit), so no
	// scenario holds its caller forever. It is called often (every request
	// of the controller, every action of the other actors, every goal
	// poll), from any goroutine.
	Limit func() error
	// RunID is recorded in the result, so a caller can tell the results it
	// asked for from older ones in the same folder.
	RunID string
	// EndState keeps every watched object as it was at the end of the run
	// in the result (History.End), for an exploration's comparison.
	EndState bool
}

// WallClockLimit returns a Limit that fails once d of real time has passed,
// and a function that releases its timer. Call it outside a synctest
// bubble: inside one, time is virtual.
func WallClockLimit(d time.Duration) (limit func() error, stop func()) {
	var passed atomic.Bool
	timer := time.AfterFunc(d, func() { passed.Store(true) })
	err := fmt.Errorf("the run passed its wall-clock limit of %v (converge run --run-timeout)", d)
	return func() error {
		if passed.Load() {
			return err
		}
		return nil
	}, func() { timer.Stop() }
}

// Poll is the grid the goal is judged and the controller sampled on: at
// most once a Poll, and only when the answer can change (see watchGoal).
const Poll = 250 * time.Millisecond

// stopGrace bounds the wait for the world and observer at the end.
const stopGrace = 30 * time.Second

// instanceGrace bounds the wait for an instance to return once its
// context ended. client-go's reflector (v0.35 to v0.37) waits out its
// watch-list backoff without looking at its context: up to 60 s (30 s
// capped, jittered up to twice) after a partition or a run of refused
// watches. An instance whose informers do that returns late, not never,
// so the grace covers it with a margin.
const instanceGrace = 70 * time.Second

// slowPods is the pod lag from which a failing run gets a note that the
// backend, not only the controller, may be to blame.
const slowPods = 5 * time.Second

// Run runs s once and judges it. It always returns a Result: a run that
// could not be carried out has Error set. On the fake backend, call it
// inside a synctest bubble for virtual time.
func Run(ctx context.Context, s *Scenario, opts Options) (res *reports.Result) {
	wallStart := time.Now()
	backend := ""
	if opts.Backend != nil {
		backend = opts.Backend.Name()
	}
	res = &reports.Result{
		Schema: reports.SchemaVersion, Scenario: s.Name, Description: s.Description, Catches: s.Catches,
		Plan:    s.Faults,
		Backend: backend, Seed: opts.Seed, Replay: opts.Replay, Started: time.Now(),
		Versions: versions(), RunID: opts.RunID,
	}
	if spec, err := json.Marshal(s); err == nil {
		res.Spec = spec
	}
	if opts.Controller == nil && len(s.Controller.Command) > 0 {
		opts.Controller = Command{Args: s.Controller.Command}
	}
	if opts.Controller != nil {
		res.Controller = opts.Controller.Name()
	}
	defer func() {
		if p := recover(); p != nil {
			res.Error = fmt.Sprintf("the harness panicked: %v\n%s", p, debug.Stack())
		}
		if res.Error != "" {
			res.Pass = false
			res.Findings = append(res.Findings, reports.Finding{Check: reports.CheckHarness, Kind: reports.KindHarness, Detail: res.Error})
			res.Reasons = reports.Sentences(res.Findings, res.Started)
		}
		res.Wall = reports.Duration(time.Since(wallStart))
	}()
	if err := s.Validate(); err != nil {
		res.Error = fmt.Sprintf("invalid scenario: %v", err)
		return res
	}
	if opts.Controller == nil {
		res.Error = "no controller under test: set Options.Controller"
		return res
	}
	if opts.Backend == nil {
		res.Error = "no backend: set Options.Backend (backends.Named, or a sim.Kind of your own)"
		return res
	}
	if !s.RunsOn(backend) {
		res.Error = fmt.Sprintf("scenario %s does not run on %s (backends: %v)", s.Name, backend, s.withDefaults().Backends)
		return res
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if !prepared.Load() {
		res.Error = "the process is not prepared for runs: call scenarios.PrepareProcess() once, from TestMain " +
			"(scenariotest's functions call it for you); it replaces apimachinery's process-wide error and panic handling, as its doc says"
		return res
	}
	r := &run{s: s.withDefaults(), opts: opts, res: res, hist: newHistory(), paces: map[string]*pacer{}}
	ctls, err := resolveControllers(&r.s, opts)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	r.controllers = ctls
	r.caches = newCaches(r)
	r.hotLoopN = r.spinBound()
	r.createN = max(createsWithoutEnd, createsPerObject*r.s.ObjectCount())
	defer watchPanics(r.hist)()
	if err := r.run(ctx); err != nil {
		res.Error = err.Error()
		res.Unavailable = errors.Is(err, sim.ErrUnavailable)
	}
	if err := r.failed.Load(); err != nil {
		res.Error = (*err).Error()
	}
	if r.limited.Load() {
		res.Error = opts.Limit().Error()
	}
	if logged, ok := r.planeOf().(sim.Logged); ok && (!res.Pass || res.Error != "") {
		res.PlaneLogs = logged.Logs()
	}
	if opts.Backend.Virtual() && ctx.Err() == nil && !r.limited.Load() {
		// What the instances left winding down ends in virtual time, as
		// it would in real time; what is left after that, RunFake judges,
		// with the result kept for it in case the linger never returns (a
		// goroutine waiting for a lock stops the bubble's clock).
		bubble.Keep(res)
		bubble.Linger(instanceGrace)
		bubble.Kept(bubble.ID())
	}
	return res
}

// planeOf is the run's control plane, if its backend started and has one.
func (r *run) planeOf() sim.ControlPlane {
	if r.env == nil {
		return nil
	}
	return r.env.ControlPlane
}

// run is one run in progress.
type run struct {
	s    Scenario
	opts Options
	res  *reports.Result
	hist *history
	// caches watches what the controller's informers hold.
	caches *caches
	// compiled are the scenario's rules, for the goal.
	compiled *check.Compiled

	env   *sim.Env
	kube  *kube
	start time.Time
	obs   *observer
	judge Judge // the controller's own, or nil
	plan  []chaos.Injection
	// controllers are the controller under test, then the scenario's
	// others.
	controllers []*controllerRun

	mu         sync.Mutex
	instances  map[int]*instance
	nextIndex  int
	restarting int // restarts scheduled, not yet started
	wg         sync.WaitGroup
	injectors  []*chaos.Injector
	proxies    []*chaos.Proxy
	dir        string // scratch files: kubeconfigs
	// afterBackend runs once the backend has stopped.
	afterBackend []func()

	// abort ends the run early (a hot loop); paces count each
	// controller's requests since the clock last moved, by name.
	abort    context.CancelFunc
	aborted  atomic.Bool
	limited  atomic.Bool // the caller's Limit ended the run
	paceMu   sync.Mutex
	paces    map[string]*pacer
	hotLoopN int // see hotLoop
	createN  int // see createsWithoutEnd
	// failed is the first step of the harness that failed during the run
	// (see fail).
	failed atomic.Pointer[error]
}

// fail ends the run as the harness's error: a step it could not take
// (an interference the API server refused), no verdict on the controller.
func (r *run) fail(err error) {
	if r.failed.CompareAndSwap(nil, &err) {
		r.hist.log(time.Now(), err.Error())
		if r.abort != nil {
			r.aborted.Store(true)
			r.abort()
		}
	}
}

// hotLoopRequests is how many requests the controller may make without the
// clock moving, at the least. In virtual time a controller that spins (a
// key retried at once, a write that triggers itself) never lets the clock
// advance, so the deadline would never come: the run ends there instead.
// The scaler on a thousand Deployments makes a few thousand at one
// instant, and on ten thousand a write and an Event each: a scenario may
// make hotLoopPerObject per object it creates.
const (
	hotLoopRequests  = 20_000
	hotLoopPerObject = 10
)

// createsWithoutEnd is how many objects (its Leases and Events aside) a
// controller may create in one run, at the least: past it, one that
// creates without end (a create that does not see its own object) would
// fill the store until the deadline, in virtual time at once. A scenario
// may create createsPerObject per object it creates.
const (
	createsWithoutEnd = 2_000
	createsPerObject  = 20
)

// hotLoop is the run's bound on requests without the clock moving.
func (r *run) spinBound() int {
	return max(hotLoopRequests, hotLoopPerObject*r.s.ObjectCount())
}

// pacer counts one controller's requests since the clock last moved, and
// the objects it created (its bookkeeping aside).
type pacer struct {
	at      time.Time
	n       int
	created int
}

// pace counts a request q of a controller, and ends the run when that
// controller spins (requests without the clock moving) or creates without
// end. Each controller is paced on its own: two busy at one instant do
// not add up to a hot loop.
func (r *run) pace(q reports.Request) {
	at := q.At
	r.paceMu.Lock()
	p := r.paces[q.Controller]
	if p == nil {
		p = &pacer{}
		r.paces[q.Controller] = p
	}
	if !at.Equal(p.at) {
		p.at, p.n = at, 0
	}
	p.n++
	spins := p.n == r.hotLoopN
	if q.Verb == "create" && check.SuccessfulWrite(q) {
		p.created++
	}
	creates, created := p.created == r.createN, p.created
	r.paceMu.Unlock()
	if check.IsWrite(q.Verb) {
		r.caches.wrote(q.Instance, q)
	}
	r.checkLimit()
	who := "the controller"
	if q.Controller != "" {
		who += " " + q.Controller
	}
	switch {
	case spins:
		r.hotLoop(at, fmt.Sprintf("%d requests without the clock moving: %s spins", r.hotLoopN, who))
	case creates:
		r.hotLoop(at, fmt.Sprintf("%d objects created: %s creates without end", created, who))
	}
}

// hotLoop records a hot loop and ends the run.
func (r *run) hotLoop(at time.Time, detail string) {
	r.hist.find(check.Finding(InvNoHotLoop, at, reports.Subject{}, nil, detail))
	if r.abort != nil {
		r.aborted.Store(true)
		r.abort()
	}
}

// checkLimit ends the run as an error once the caller's Limit says so, and
// reports whether it has.
func (r *run) checkLimit() bool {
	if r.opts.Limit == nil {
		return false
	}
	if err := r.opts.Limit(); err != nil && r.limited.CompareAndSwap(false, true) {
		r.hist.log(time.Now(), err.Error())
		if r.abort != nil {
			r.aborted.Store(true)
			r.abort()
		}
	}
	return r.limited.Load()
}

type instance struct {
	index  int
	ctl    *controllerRun
	cancel context.CancelFunc
	runner Runner
	done   chan struct{}
	ended  bool
	elects bool // the instance elects a leader
	// queues: the client-go work queues the instance made (those with a
	// name), read when its runner is no Prober.
	queues workqueues.Tally
}

func (r *run) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.abort = cancel
	plan, err := r.s.injections()
	if err != nil {
		return err
	}
	r.plan = plan
	bindFaults(&r.s, plan, r.controllers)
	backend, err := r.backend(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	env, err := backend.Start(ctx)
	if err != nil {
		return fmt.Errorf("starting the %s backend: %w", r.opts.Backend.Name(), err)
	}
	defer func() {
		if err := backend.Stop(); err != nil {
			r.hist.log(time.Now(), "stopping the backend: "+err.Error())
		}
		for _, f := range r.afterBackend {
			f()
		}
	}()
	r.env = env
	if sup, ok := env.ControlPlane.(sim.Supervised); ok {
		defer r.supervise(ctx, sup, began)()
	}
	for i, in := range plan {
		if err := in.Fault.Available(r.layer(r.faultController(i))); err != nil {
			return fmt.Errorf("fault %s cannot run on %s: %w", in.Fault.Name(), r.opts.Backend, err)
		}
		if _, cp := chaos.PlaneOf(in.Fault); cp && env.ControlPlane == nil {
			return fmt.Errorf("fault %s needs a control plane the %s backend does not have", in.Fault.Name(), r.opts.Backend.Name())
		}
	}
	if r.compiled, err = check.Compile(rules(&r.s)); err != nil {
		return err
	}
	r.start = time.Now()
	r.res.Started = r.start
	r.hist.h.Start = r.start
	r.instances = map[int]*instance{}
	if err := r.connect(ctx); err != nil {
		return err
	}

	r.kube, err = newKube(env.RESTConfig, env.Namespace, env.RESTMapper)
	if err != nil {
		return err
	}
	// Runs last but one, once every actor has stopped: no controller is
	// left to finish what its finalizers hold.
	defer r.releaseFinalizers()
	// The world and the observers read through the unfaulted client.
	stopWorld, err := r.startWorld(ctx)
	if err != nil {
		return err
	}
	defer stopWorld()

	if j, ok := r.opts.Controller.(Judged); ok {
		r.judge = j.Judge()
	}
	r.obs = newObserver(r)
	if err := r.obs.start(ctx); err != nil {
		return err
	}
	defer r.obs.stop()
	if r.judge != nil {
		if err := r.judge.Start(ctx, r.view()); err != nil {
			return fmt.Errorf("starting the %s judge: %w", r.opts.Controller.Name(), err)
		}
		defer r.judge.Stop()
	}

	n, err := createObjects(ctx, env.RESTConfig, r.kube, &r.s)
	if err != nil {
		return err
	}
	r.hist.log(time.Now(), fmt.Sprintf("created %d objects", n))
	if err := r.obs.watchLate(ctx); err != nil {
		return err
	}
	// Whatever happens from here, the instances, the other actors and the
	// faults being applied end before the backend stops.
	cpCtx, cpCancel := context.WithCancel(ctx)
	shutdown := sync.OnceFunc(func() {
		cpCancel()
		r.stopInstances()
		r.caches.sweep()
		r.wg.Wait()
		r.mu.Lock()
		injectors := r.injectors
		r.mu.Unlock()
		for _, inj := range injectors {
			inj.Wait()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range r.proxies {
			_ = p.Close()
		}
		if r.dir != "" {
			_ = os.RemoveAll(r.dir)
		}
	})
	defer shutdown()
	if err := r.startSchedule(cpCtx); err != nil {
		return err
	}
	if err := r.startControllers(cpCtx); err != nil {
		return err
	}
	for i, in := range r.s.World.Interference {
		r.interfere(cpCtx, i, in)
	}

	r.watchGoal(ctx)
	shutdown()
	if r.failed.Load() == nil {
		r.verdict()
	}
	return nil
}

// releaseFinalizers clears the finalizers of the scenario's objects left in
// the run's namespace on a real server, whose namespace deletion would
// otherwise wait for a controller that is gone.
func (r *run) releaseFinalizers() {
	if !r.env.Can.Has(sim.RealAPIServer) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for _, gvk := range r.s.kinds() {
		client, m, err := r.kube.resource(gvk)
		if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, u := range list.Items {
			if len(u.GetFinalizers()) == 0 {
				continue
			}
			if _, err := client.Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				r.hist.log(time.Now(), fmt.Sprintf("clearing the finalizers of %s %s: %v", u.GetKind(), u.GetName(), err))
			}
		}
	}
}

// startWorld starts the world simulator; the function it returns stops it.
func (r *run) startWorld(ctx context.Context) (func(), error) {
	ws := r.s.World
	client := r.env.Observer
	// On a kwokctl cluster of our own, kube-scheduler and kwok do their
	// parts (sim.KwokNodes).
	kwokNodes := r.env.Can.Has(sim.KwokNodes)
	if r.env.InProcess != nil {
		// The world only reads what its informers hold: no copy per event.
		cs, err := r.env.InProcess.NewSharingClient()
		if err != nil {
			return nil, err
		}
		client = cs
	}
	// There, kwok's Stages play the pods where the readiness model maps
	// to them (kwok.PodStages); the world plays the rest.
	removeStages := func(context.Context) error { return nil }
	byStage := false
	if kwokNodes {
		stages, err := kwok.PodStages(r.env.Namespace, ws.Readiness.Model())
		if err == nil {
			if removeStages, err = kwok.InstallPodStages(ctx, r.env.RESTConfig, stages); err != nil {
				return nil, err
			}
			byStage = true
			r.hist.log(time.Now(), fmt.Sprintf("pods: kwok's stages play them (%d stages)", len(stages)))
		} else {
			r.hist.log(time.Now(), "pods: the world plays them: "+err.Error())
		}
	}
	w, err := world.New(world.Config{
		Client: client, Namespace: r.env.Namespace, Readiness: ws.Readiness.Model(), Seed: int64(r.opts.Seed),
		Scheduler: !ws.NoScheduler && !kwokNodes, Deployments: !r.env.Can.Has(sim.RealControllers) && !ws.NoDeployments, Nodes: ws.Nodes,
		KeepNodesAlive: r.env.Can.Has(sim.NodeLifecycle) && !kwokNodes, Untainted: kwokNodes, NodesByStage: kwokNodes, PodsByStage: byStage,
	})
	if err != nil {
		return nil, errors.Join(err, removeStages(context.WithoutCancel(ctx)))
	}
	worldCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(worldCtx) }()
	// The stages go once the namespace is: its pods are deleted through
	// them.
	r.afterBackend = append(r.afterBackend, func() {
		if err := removeStages(context.WithoutCancel(ctx)); err != nil {
			r.hist.log(time.Now(), err.Error())
		}
	})
	return func() {
		stop()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				r.hist.log(time.Now(), "world: "+err.Error())
			}
		case <-time.After(stopGrace):
			r.hist.log(time.Now(), "world did not stop")
		}
	}, nil
}

// view is what the controller's judge observes the run through.
func (r *run) view() View {
	return View{Client: r.env.Observer, Dynamic: r.kube.dynamic, Namespace: r.env.Namespace,
		Find: r.hist.find, Violate: r.hist.violate, Event: r.hist.event, State: r.hist.state, Log: r.hist.log}
}

// backend is the run's backend, of its kind.
func (r *run) backend(ctx context.Context) (sim.Backend, error) {
	return r.opts.Backend.For(ctx, sim.Run{Name: r.s.Name, Controller: r.controllers[0].id, NoWatchCache: r.needsNoWatchCache(), Setup: r.opts.Setup})
}

// IdentityOf is the identity c declares (see Identified), or none.
func IdentityOf(c Controller) sim.Identity {
	if id, ok := c.(Identified); ok {
		return id.Identity()
	}
	return sim.Identity{}
}

// needsNoWatchCache: a fault of the scenario is felt only where watches
// are served from storage (chaos.Plane).
func (r *run) needsNoWatchCache() bool {
	for _, f := range r.s.Faults {
		if p, _ := chaos.PlaneOfFault(f.Fault); p.NeedsNoWatchCache {
			return true
		}
	}
	return false
}

// layer is where c's requests meet the faults: the fake clientset's
// reactors where the backend hands controllers a clientset and c uses
// that, else its HTTP client.
func (r *run) layer(c *controllerRun) chaos.Layer {
	if cu, ok := c.ctl.(ConfigUser); r.env.ControllerClient != nil && !(ok && cu.UsesConfig()) {
		return chaos.Clientset
	}
	return chaos.HTTP
}

// goroutines is a dump of every goroutine's stack, cut at 256 KiB.
func goroutines() string {
	buf := make([]byte, 256<<10)
	return string(buf[:runtime.Stack(buf, true)])
}

// versions of what ran.
func versions() map[string]string {
	out := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		out["go"] = bi.GoVersion
		for _, d := range bi.Deps {
			switch d.Path {
			case "k8s.io/client-go", "sigs.k8s.io/controller-runtime":
				out[d.Path] = d.Version
			}
		}
	}
	return out
}
