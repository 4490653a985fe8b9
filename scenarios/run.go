package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/world"
)

// Options say how to run a scenario.
type Options struct {
	// Backend: fake, envtest or cluster.
	Backend string
	// Seed draws the fault probabilities and the world's randomness.
	Seed uint64
	// Controller under test. Nil means Scaler.
	Controller Controller
	// ControlPlane for envtest. Nil means the test binary's shared one
	// (envtest.SharedWith), without a watch cache for scenarios with a
	// compaction fault.
	ControlPlane *envtest.ControlPlane
	// Backend for cluster (or any other), started by Run and stopped after.
	// Required for cluster.
	SimBackend sim.Backend
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

// Poll is how often the goal is evaluated and the controller sampled.
const Poll = 250 * time.Millisecond

// stopGrace bounds the wait for instances, world and observer at the end.
const stopGrace = 30 * time.Second

// slowPods is the pod lag from which a failing run gets a note that the
// backend, not only the controller, may be to blame.
const slowPods = 5 * time.Second

// Run runs s once and judges it. It always returns a Result: a run that
// could not be carried out has Error set. On the fake backend, call it
// inside a synctest bubble for virtual time.
func Run(ctx context.Context, s *Scenario, opts Options) (res *reports.Result) {
	wallStart := time.Now()
	res = &reports.Result{
		Schema: reports.SchemaVersion, Scenario: s.Name, Description: s.Description, Catches: s.Catches,
		Plan:    s.Faults,
		Backend: opts.Backend, Seed: opts.Seed, Replay: opts.Replay, Started: time.Now(),
		Versions: versions(), RunID: opts.RunID,
	}
	if spec, err := json.Marshal(s); err == nil {
		res.Spec = spec
	}
	if opts.Controller == nil {
		opts.Controller = Scaler{}
		if len(s.Controller.Command) > 0 {
			opts.Controller = Command{Args: s.Controller.Command}
		}
	}
	res.Controller = opts.Controller.Name()
	defer func() {
		if p := recover(); p != nil {
			res.Error = fmt.Sprintf("the harness panicked: %v\n%s", p, debug.Stack())
		}
		if res.Error != "" {
			res.Pass = false
			res.Reasons = append(res.Reasons, "the run could not be carried out: "+firstLine(res.Error))
		}
		res.Wall = reports.Duration(time.Since(wallStart))
	}()
	if err := s.Validate(); err != nil {
		res.Error = fmt.Sprintf("invalid scenario: %v", err)
		return res
	}
	if !s.RunsOn(opts.Backend) {
		res.Error = fmt.Sprintf("scenario %s does not run on %s (backends: %v)", s.Name, opts.Backend, s.withDefaults().Backends)
		return res
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	r := &run{s: s.withDefaults(), opts: opts, res: res, hist: newHistory()}
	defer watchPanics(r.hist)()
	if err := r.run(ctx); err != nil {
		res.Error = err.Error()
	}
	if r.limited.Load() {
		res.Error = opts.Limit().Error()
	}
	return res
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// run is one run in progress.
type run struct {
	s    Scenario
	opts Options
	res  *reports.Result
	hist *history

	env     *sim.Env
	fakeBE  *fake.Backend
	start   time.Time
	obs     *observer
	plan    []chaos.Injection
	managed []string

	mu         sync.Mutex
	instances  map[int]*instance
	nextIndex  int
	restarting int // restarts scheduled, not yet started
	lastWriter int // the instance that last wrote a Deployment
	wrote      bool
	wg         sync.WaitGroup
	shared     chaos.Shared
	injectors  []*chaos.Injector
	proxies    []*chaos.Proxy
	dir        string // scratch files: kubeconfigs

	// abort ends the run early (a hot loop); paceAt and paceN count the
	// requests made since the clock last moved.
	abort   context.CancelFunc
	aborted atomic.Bool
	limited atomic.Bool // the caller's Limit ended the run
	paceMu  sync.Mutex
	paceAt  time.Time
	paceN   int
}

// hotLoopRequests is how many requests the controller may make without the
// clock moving. In virtual time a controller that spins (a key retried at
// once, a write that triggers itself) never lets the clock advance, so the
// deadline would never come: the run ends there instead. The scaler on a
// thousand Deployments makes a few thousand at one instant.
const hotLoopRequests = 20_000

// pace counts a request made at at, and ends the run when the controller
// spins.
func (r *run) pace(at time.Time) {
	r.paceMu.Lock()
	if !at.Equal(r.paceAt) {
		r.paceAt, r.paceN = at, 0
	}
	r.paceN++
	tripped := r.paceN == hotLoopRequests
	r.paceMu.Unlock()
	r.checkLimit()
	if tripped {
		r.hist.violate(InvNoHotLoop, at, "", "", fmt.Sprintf("%d requests without the clock moving: the controller spins", hotLoopRequests))
		if r.abort != nil {
			r.aborted.Store(true)
			r.abort()
		}
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
	cancel context.CancelFunc
	runner Runner
	done   chan struct{}
	ended  bool
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
	backend, err := r.backend()
	if err != nil {
		return err
	}
	env, err := backend.Start(ctx)
	if err != nil {
		return fmt.Errorf("starting the %s backend: %w", r.opts.Backend, err)
	}
	defer func() {
		if err := backend.Stop(); err != nil {
			r.hist.log(time.Now(), "stopping the backend: "+err.Error())
		}
	}()
	r.env = env
	for _, in := range plan {
		if err := in.Fault.Available(r.layer()); err != nil {
			return fmt.Errorf("fault %s cannot run on %s: %w", in.Fault.Name(), r.opts.Backend, err)
		}
		if _, cp := cpFault(in.Fault); cp && env.ControlPlane == nil {
			return fmt.Errorf("fault %s needs a control plane the %s backend does not have", in.Fault.Name(), r.opts.Backend)
		}
	}
	r.start = time.Now()
	r.res.Started = r.start
	r.instances = map[int]*instance{}

	// The world and the observer read through the unfaulted client.
	w, err := world.New(world.Config{
		Client: env.Observer, Namespace: env.Namespace, Readiness: r.s.Readiness.Model(), Seed: int64(r.opts.Seed),
		Scheduler: true, Deployments: r.opts.Backend == Fake, Nodes: max(3, (r.s.Workload.Deployments*int(r.s.Workload.MaxReplicas)+109)/110),
		KeepNodesAlive: r.opts.Backend == Cluster,
	})
	if err != nil {
		return err
	}
	worldCtx, stopWorld := context.WithCancel(ctx)
	worldDone := make(chan error, 1)
	go func() { worldDone <- w.Run(worldCtx) }()
	defer func() {
		stopWorld()
		select {
		case err := <-worldDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				r.hist.log(time.Now(), "world: "+err.Error())
			}
		case <-time.After(stopGrace):
			r.hist.log(time.Now(), "world did not stop")
		}
	}()

	r.obs = newObserver(env.Observer, env.Namespace, r)
	if err := r.obs.start(ctx); err != nil {
		return err
	}
	defer r.obs.stop()

	if err := r.createWorkload(ctx); err != nil {
		return err
	}
	// Whatever happens from here, the instances, the other actors and the
	// faults being applied end before the backend stops.
	cpCtx, cpCancel := context.WithCancel(ctx)
	shutdown := sync.OnceFunc(func() {
		cpCancel()
		r.stopInstances()
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
	if wait := time.Duration(r.s.Controller.StartAfter); wait > 0 {
		select {
		case <-cpCtx.Done():
			return cpCtx.Err()
		case <-time.After(wait):
		}
	}
	for range r.s.Controller.Instances {
		if err := r.startInstance(cpCtx); err != nil {
			return err
		}
	}
	if r.s.Interference.LabelEditsEvery > 0 {
		r.secondWriter(cpCtx)
	}
	if r.s.Interference.PodDeletionsEvery > 0 {
		r.evictor(cpCtx)
	}

	r.watchGoal(ctx)
	shutdown()
	r.judge()
	return nil
}

func (r *run) backend() (sim.Backend, error) {
	switch r.opts.Backend {
	case Fake:
		b, err := fake.New(fake.Config{Namespace: "converge"})
		r.fakeBE = b
		return b, err
	case Envtest:
		cp := r.opts.ControlPlane
		if cp == nil {
			var err error
			if cp, err = envtest.SharedWith(context.Background(), envtest.Options{NoWatchCache: r.needsNoWatchCache()}); err != nil {
				return nil, err
			}
		}
		return envtest.NewBackend(cp, r.s.Name+"-")
	default:
		if r.opts.SimBackend == nil {
			return nil, fmt.Errorf("backend %q: no backend given", r.opts.Backend)
		}
		return r.opts.SimBackend, nil
	}
}

func (r *run) needsNoWatchCache() bool {
	for _, f := range r.s.Faults {
		if f.Fault == "compaction" {
			return true
		}
	}
	return false
}

func (r *run) layer() chaos.Layer {
	if r.opts.Backend == Fake {
		return chaos.Fake
	}
	return chaos.HTTP
}

func cpFault(f chaos.Fault) (string, bool) {
	switch f.Name() {
	case "apiserver-restart", "compaction":
		return f.Name(), true
	}
	return "", false
}

// createWorkload creates the scenario's Deployments through the observer.
func (r *run) createWorkload(ctx context.Context) error {
	wl := r.s.Workload
	mk := func(name string, managed bool) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		for k, v := range wl.Labels {
			labels[k] = v
		}
		dLabels := map[string]string{}
		for k, v := range labels {
			dLabels[k] = v
		}
		if managed {
			dLabels[controller.LabelEnabled] = controller.ValueEnabled
		}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: dLabels,
				Annotations: map[string]string{controller.AnnotationMaxReplicas: strconv.Itoa(int(wl.MaxReplicas))}},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(wl.Replicas),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: wl.Image}}},
				},
			},
		}
	}
	client := r.env.Observer.AppsV1().Deployments(r.env.Namespace)
	for i := range wl.Deployments {
		d := mk(fmt.Sprintf("%s-%d", wl.Prefix, i), true)
		if _, err := client.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", d.Name, err)
		}
		r.managed = append(r.managed, d.Name)
	}
	for i := range wl.Unmanaged {
		d := mk(fmt.Sprintf("%s-unmanaged-%d", wl.Prefix, i), false)
		if _, err := client.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", d.Name, err)
		}
	}
	r.hist.log(time.Now(), fmt.Sprintf("created %d managed and %d unmanaged Deployments", wl.Deployments, wl.Unmanaged))
	return nil
}

// startInstance starts one controller instance. The first instances get
// the whole plan; replacements get it without its process faults, which
// fire once per run.
func (r *run) startInstance(ctx context.Context) error {
	r.mu.Lock()
	idx := r.nextIndex
	r.nextIndex++
	r.mu.Unlock()

	// Every instance has the same plan and shares its counters and windows
	// (so "the first PATCH" is the first of any instance, and a crash with
	// nth: 1 happens once per run); scheduled control-plane faults run from
	// the run's own injector instead.
	var injections []chaos.Injection
	for _, in := range r.plan {
		if _, cp := cpFault(in.Fault); !cp || !in.Fault.Target().IsZero() {
			injections = append(injections, in)
		}
	}
	instCtx, cancel := context.WithCancel(ctx)
	inst := &instance{index: idx, cancel: cancel, done: make(chan struct{})}
	plan := chaos.Plan{
		Seed:       r.opts.Seed,
		Injections: injections,
		Shared:     &r.shared,
		Recorder:   r.hist,
		OnCrash: func() {
			r.hist.log(time.Now(), fmt.Sprintf("instance %d crashed: stopped without a drain, its client fenced", idx))
			if k, ok := inst.runner.(interface{ Kill() }); ok {
				k.Kill() // a process: SIGKILL
			}
			r.endInstance(ctx, inst)
		},
		OnTerminate: func() {
			r.hist.log(time.Now(), fmt.Sprintf("instance %d terminated: graceful shutdown", idx))
			r.endInstance(ctx, inst)
		},
	}
	if r.env.ControlPlane != nil {
		plan.ControlPlane = r.env.ControlPlane
	}
	inj, err := chaos.NewInjector(plan)
	if err != nil {
		return err
	}
	client, err := r.client(idx, inj)
	if err != nil {
		return err
	}
	in := Instance{Index: idx, Identity: fmt.Sprintf("instance-%d", idx), Namespace: r.env.Namespace, Client: client,
		Cooldown: time.Duration(r.s.Controller.Cooldown), Log: r.opts.Log, Recorder: r.hist}
	if _, out := r.opts.Controller.(Command); out {
		if in.Kubeconfig, err = r.proxy(idx, inj); err != nil {
			return err
		}
	}
	if r.s.Controller.Instances > 1 {
		leaseNS := r.env.Namespace
		if r.opts.Backend != Fake {
			leaseNS = "converge-system" // where config/'s Role lets the scaler hold Leases
		}
		ld := time.Duration(r.s.Controller.LeaseDuration)
		in.LeaderElection = &controller.LeaderElectionConfig{Namespace: leaseNS, Name: r.env.Namespace, Identity: in.Identity,
			LeaseDuration: ld, RenewDeadline: ld * 2 / 3, RetryPeriod: ld / 7}
	}
	runner, err := r.opts.Controller.New(in)
	if err != nil {
		return fmt.Errorf("building instance %d: %w", idx, err)
	}
	inst.runner = runner
	r.mu.Lock()
	r.instances[idx] = inst
	r.injectors = append(r.injectors, inj)
	r.mu.Unlock()
	inj.Start(instCtx)
	r.hist.log(time.Now(), fmt.Sprintf("instance %d started", idx))
	// Not in r.wg: an instance that never returns must not hold up the
	// run's end (stopInstances waits for it with a grace, and says so).
	go func() {
		defer close(inst.done)
		defer func() {
			if p := recover(); p != nil {
				r.hist.violate("no-panic", time.Now(), "", "", fmt.Sprintf("instance %d panicked: %v", idx, p))
			}
		}()
		err := runner.Run(instCtx)
		switch {
		case errors.Is(err, errUncleanExit):
			r.hist.violate(InvCleanShutdown, time.Now(), "", "", fmt.Sprintf("instance %d %v", idx, err))
		case err != nil && !errors.Is(err, context.Canceled):
			r.hist.log(time.Now(), fmt.Sprintf("instance %d ended: %v", idx, err))
		}
	}()
	return nil
}

// proxy starts the fault proxy of an out-of-process instance (closed when
// the run ends) and returns the kubeconfig that reaches it. Its requests are
// recorded as they leave the proxy for the server.
func (r *run) proxy(idx int, inj *chaos.Injector) (string, error) {
	if r.env.ControllerConfig == nil || r.fakeBE != nil {
		// The fake's REST door is in process: no listener to reach.
		return "", fmt.Errorf("the %s backend has no server for a controller binary to reach", r.opts.Backend)
	}
	upstream := rest.CopyConfig(r.env.ControllerConfig)
	upstream.Wrap(recordHTTP(idx, r))
	p, err := chaos.NewProxy(upstream, inj)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.proxies = append(r.proxies, p)
	if r.dir == "" {
		r.dir, err = os.MkdirTemp("", "converge-run-")
	}
	dir := r.dir
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("kubeconfig-%d", idx))
	return path, p.WriteKubeconfig(path)
}

// startSchedule runs the scheduled control-plane faults (those with no
// target) once for the run.
func (r *run) startSchedule(ctx context.Context) error {
	var scheduled []chaos.Injection
	for _, in := range r.plan {
		if _, cp := cpFault(in.Fault); cp && in.Fault.Target().IsZero() {
			scheduled = append(scheduled, in)
		}
	}
	if len(scheduled) == 0 {
		return nil
	}
	inj, err := chaos.NewInjector(chaos.Plan{Seed: r.opts.Seed, Injections: scheduled, Recorder: r.hist, ControlPlane: r.env.ControlPlane})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.injectors = append(r.injectors, inj)
	r.mu.Unlock()
	inj.Start(ctx)
	return nil
}

// endInstance stops inst (its Run's context ends) and schedules its
// replacement.
func (r *run) endInstance(ctx context.Context, inst *instance) {
	r.mu.Lock()
	if inst.ended {
		r.mu.Unlock()
		return
	}
	inst.ended = true
	r.restarting++
	r.mu.Unlock()
	inst.cancel()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// A process that crashed is gone; an instance that does not
		// return is replaced all the same (stopInstances judges it).
		select {
		case <-inst.done:
		case <-ctx.Done():
		case <-time.After(stopGrace):
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(r.s.Controller.RestartAfter)):
			if err := r.startInstance(ctx); err != nil {
				r.hist.log(time.Now(), "restarting: "+err.Error())
			}
		}
		r.mu.Lock()
		r.restarting--
		r.mu.Unlock()
	}()
}

func (r *run) stopInstances() {
	r.mu.Lock()
	var all []*instance
	for _, in := range r.instances {
		all = append(all, in)
	}
	r.mu.Unlock()
	for _, in := range all {
		in.cancel()
	}
	for _, in := range all {
		select {
		case <-in.done:
		case <-time.After(stopGrace):
			r.hist.violate(InvCleanShutdown, time.Now(), "", "", fmt.Sprintf("instance %d did not return within %v of its context ending", in.index, stopGrace))
			r.hist.log(time.Now(), "goroutines at that instant:\n"+goroutines())
		}
	}
}

// client is instance idx's client: through inj, recording every request.
func (r *run) client(idx int, inj *chaos.Injector) (kubernetes.Interface, error) {
	if r.fakeBE != nil {
		cs, err := r.fakeBE.NewClient()
		if err != nil {
			return nil, err
		}
		if err := inj.InstallFake(&cs.Fake); err != nil {
			return nil, err
		}
		recordFake(cs, idx, r)
		return cs, nil
	}
	cfg := chaos.Configure(r.env.ControllerConfig, inj)
	cfg.Wrap(recordHTTP(idx, r))
	return kubernetes.NewForConfig(cfg)
}

var _ kubernetes.Interface = (*k8sfake.Clientset)(nil)

// every calls act(n) every period from the start of the run until until
// (from the start) or the end of ctx, in its own goroutine.
func (r *run) every(ctx context.Context, period, until Duration, act func(n int)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		end := r.start.Add(time.Duration(until))
		tick := time.NewTicker(time.Duration(period))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if now.After(end) {
					return
				}
			}
			r.checkLimit()
			act(n)
		}
	}()
}

// secondWriter edits a label of the managed Deployments in turn, as another
// team's tooling would, so the controller's writes meet real conflicts.
func (r *run) secondWriter(ctx context.Context) {
	client := r.env.Observer.AppsV1().Deployments(r.env.Namespace)
	r.every(ctx, r.s.Interference.LabelEditsEvery, r.s.Interference.LabelEditsUntil, func(n int) {
		name := r.managed[n%len(r.managed)]
		d, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		d.Labels["converge.dev/edited"] = strconv.Itoa(n)
		if _, err := client.Update(ctx, d, metav1.UpdateOptions{}); err == nil {
			r.hist.log(time.Now(), "second writer edited the labels of "+name)
		}
	})
}

// evictor deletes one pod of the managed Deployments in turn, as a node
// drain would; the Deployment's controller replaces it.
func (r *run) evictor(ctx context.Context) {
	pods := r.env.Observer.CoreV1().Pods(r.env.Namespace)
	r.every(ctx, r.s.Interference.PodDeletionsEvery, r.s.Interference.PodDeletionsUntil, func(n int) {
		name := r.managed[n%len(r.managed)]
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(list.Items) == 0 {
			return
		}
		victim := list.Items[n%len(list.Items)].Name
		if err := pods.Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err == nil {
			r.hist.log(time.Now(), "evicted pod "+victim)
		}
	})
}

// watchGoal polls the goal until it has held for the settle window or the
// deadline passed.
func (r *run) watchGoal(ctx context.Context) {
	deadline := r.start.Add(time.Duration(r.s.Timing.Deadline))
	settle := time.Duration(r.s.Timing.Settle)
	var holding time.Time
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !r.aborted.Load() {
				r.res.Error = "cancelled: " + ctx.Err().Error()
			}
			return
		case <-tick.C:
		}
		if r.checkLimit() {
			return
		}
		now := time.Now()
		r.sample(now)
		ok, why := r.goal()
		switch {
		case ok && holding.IsZero():
			holding = now
			r.hist.log(now, "goal holds")
		case !ok && !holding.IsZero():
			holding = time.Time{}
			r.hist.log(now, "goal lost: "+why)
		}
		// A run is not over while faults are still to come.
		if ok && now.Sub(holding) >= settle && now.Sub(r.start) >= r.faultsEnd() {
			r.res.Converged = true
			r.res.TimeToConverge = reports.Duration(holding.Sub(r.start))
			return
		}
		if ok {
			why = fmt.Sprintf("the goal held from %v on, short of the %v settle window", holding.Sub(r.start), settle)
		}
		if !now.Before(deadline) {
			r.res.Reasons = append(r.res.Reasons, fmt.Sprintf("did not converge within %v: %s", time.Duration(r.s.Timing.Deadline), why))
			return
		}
	}
}

// faultsEnd is when the last fault window closes, from the start.
func (r *run) faultsEnd() time.Duration {
	var end time.Duration
	for _, f := range r.s.Faults {
		w := f.When
		switch {
		case w.Until > 0:
			end = max(end, w.Until)
		case w.Every > 0 && w.Count > 0:
			end = max(end, w.After+w.Every*time.Duration(w.Count-1))
		default:
			end = max(end, w.After)
		}
	}
	return end
}

// goal: every managed Deployment at the policy's fixed point, and a live
// instance with nothing queued or in progress.
func (r *run) goal() (bool, string) {
	var off []string
	for _, name := range r.managed {
		st, ok := r.obs.state(name)
		switch {
		case !ok:
			off = append(off, name+": not observed")
		case st.Desired >= st.Max:
		case 2*st.Ready >= st.Desired && st.Pods == st.Desired && st.Settled:
		default:
			off = append(off, fmt.Sprintf("%s: %d replicas, %d pods, %d ready, max %d", name, st.Desired, st.Pods, st.Ready, st.Max))
		}
	}
	if len(off) > 0 {
		more := ""
		if len(off) > 3 {
			more = fmt.Sprintf(" (and %d more)", len(off)-3)
			off = off[:3]
		}
		return false, "not at the policy's fixed point: " + strings.Join(off, "; ") + more
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restarting > 0 {
		return false, "an instance is being replaced"
	}
	live := 0
	for _, in := range r.instances {
		if in.ended {
			continue
		}
		p, ok := in.runner.(Prober)
		if !ok {
			live++
			continue
		}
		pr := p.Probe()
		if !pr.Leading {
			continue // a standby's queue fills and waits, as it should
		}
		live++
		if pr.QueueDepth > 0 || pr.Busy {
			return false, fmt.Sprintf("instance %d has work: %d queued", in.index, pr.QueueDepth)
		}
	}
	if live == 0 {
		return false, "no instance is running and leading"
	}
	return true, ""
}

// sample records the controllers' probes when they changed.
func (r *run) sample(now time.Time) {
	r.mu.Lock()
	var total Probe
	probed := false
	for _, in := range r.instances {
		if p, ok := in.runner.(Prober); ok {
			pr := p.Probe()
			total.QueueDepth += pr.QueueDepth
			total.Reconciles += pr.Reconciles
			total.Retries += pr.Retries
			probed = true
		}
	}
	r.mu.Unlock()
	if probed {
		r.hist.sample(reports.Sample{At: now, QueueDepth: total.QueueDepth, Reconciles: total.Reconciles, Retries: total.Retries})
	}
}

// judge turns the history into the verdict, counters and budgets.
func (r *run) judge() {
	res := r.res
	h := r.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	res.Simulated = reports.Duration(time.Since(r.start))
	res.Settle, res.Deadline = r.s.Timing.Settle, r.s.Timing.Deadline
	res.Invariants = []string{InvReplicasWithinMax, InvNeverScalesDown, InvWritesOnlyReplica, InvOnlyLabelled, InvSingleWriter, InvNoPanic, InvCleanShutdown, InvNoHotLoop}
	res.History = h.h
	res.Violations = h.violations
	sort.Slice(res.Violations, func(i, j int) bool { return res.Violations[i].At.Before(res.Violations[j].At) })
	for _, v := range res.Violations {
		res.Reasons = append(res.Reasons, fmt.Sprintf("invariant %s broken at %v: %s", v.Invariant, v.At.Sub(r.start).Round(time.Millisecond), v.Detail))
	}
	c := reports.Counters{RequestsByVerb: map[string]int{}, RequestsByCode: map[string]int{}, Writes: map[string]int{}, Needed: map[string]int{},
		Reconciles: -1, Retries: -1, Faults: len(h.h.Faults), Instances: r.nextIndex}
	for _, q := range h.h.Requests {
		c.RequestsByVerb[q.Verb]++
		code := strconv.Itoa(q.Code)
		if q.Code == 0 {
			code = "error"
		}
		c.RequestsByCode[code]++
	}
	for name, n := range h.writes {
		c.Writes[name] = n
	}
	for _, name := range r.managed {
		c.Needed[name] = r.obs.changes(name)
	}
	if n := len(h.h.Samples); n > 0 {
		c.Reconciles, c.Retries = h.h.Samples[n-1].Reconciles, h.h.Samples[n-1].Retries
	}
	c.PodLag = reports.Duration(reports.PodLag(h.h.States))
	res.Counters = c
	res.Unfired = unfired(r.s.Faults, h.h.Faults)

	b := r.s.Budgets
	for _, name := range r.managed {
		w, need := c.Writes[name], c.Needed[name]
		if b.WritesPerDeployment > 0 && w > b.WritesPerDeployment {
			res.Reasons = append(res.Reasons, fmt.Sprintf("budget: %d writes of %s, budget %d", w, name, b.WritesPerDeployment))
		}
		if b.WriteAmplification > 0 && w > 0 && float64(w) > b.WriteAmplification*float64(max(need, 1)) {
			res.Reasons = append(res.Reasons, fmt.Sprintf("budget: %d writes of %s where %d were needed (amplification %.1f, budget %.1f)", w, name, need, float64(w)/float64(max(need, 1)), b.WriteAmplification))
		}
	}
	if b.Reconciles > 0 && c.Reconciles > b.Reconciles {
		res.Reasons = append(res.Reasons, fmt.Sprintf("budget: %d reconciles, budget %d", c.Reconciles, b.Reconciles))
	}
	verbs := make([]string, 0, len(b.Requests))
	for v := range b.Requests {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	for _, v := range verbs {
		if n := c.RequestsByVerb[v]; n > b.Requests[v] {
			res.Reasons = append(res.Reasons, fmt.Sprintf("budget: %d %s requests, budget %d", n, v, b.Requests[v]))
		}
	}
	res.Pass = len(res.Reasons) == 0 && res.Converged
	if lag := time.Duration(c.PodLag); !res.Pass && lag >= slowPods {
		res.Notes = append(res.Notes, fmt.Sprintf("a Deployment waited %v for the pods it asked for: the %s backend was slow to create them, and the scenario's timings may not have left room for that", lag.Round(100*time.Millisecond), r.opts.Backend))
	}
}

// unfired names the faults of specs that no firing came from, as
// "fault 2 (watch-expired-mid-stream on pods)".
func unfired(specs []chaos.Spec, firings []chaos.Firing) []string {
	var out []string
	for i, spec := range specs {
		in, err := spec.Build()
		if err != nil {
			continue
		}
		fired := slices.ContainsFunc(firings, func(f chaos.Firing) bool {
			return f.Fault == spec.Fault && reflect.DeepEqual(f.Target, in.Fault.Target())
		})
		if !fired {
			name := spec.Fault
			if spec.Target.Resource != "" {
				name += " on " + spec.Target.Resource
			}
			out = append(out, fmt.Sprintf("fault %d (%s)", i, name))
		}
	}
	return out
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
