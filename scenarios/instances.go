package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/internal/workqueues"
)

// startInstance starts one instance of controller c, on clients through
// an injector of c's faults. Instances are numbered across the run's
// controllers, so an index names one instance of one of them.
func (r *run) startInstance(ctx context.Context, c *controllerRun) error {
	r.mu.Lock()
	idx := r.nextIndex
	r.nextIndex++
	restarted := c.started >= c.spec.Instances
	c.started++
	r.mu.Unlock()

	// Every instance of c has the same plan and shares its counters and
	// windows (so "the first PATCH" is the first of any instance, and a
	// crash with nth: 1 happens once per run); scheduled control-plane
	// faults run from the run's own injector instead.
	var injections []chaos.Injection
	for _, in := range c.plan {
		if _, cp := chaos.PlaneOf(in.Fault); !cp || !in.Fault.Target().IsZero() {
			injections = append(injections, in)
		}
	}
	instCtx, cancel := context.WithCancel(ctx)
	inst := &instance{index: idx, ctl: c, cancel: cancel, done: make(chan struct{})}
	recorder := r.recorderOf(c)
	plan := chaos.Plan{
		Seed:       r.opts.Seed,
		Injections: injections,
		Shared:     &c.shared,
		Recorder:   recorder,
		Restarted:  restarted,
		OnCrash: func() {
			r.hist.log(time.Now(), fmt.Sprintf("instance %d%s crashed: stopped without a drain, its client fenced", idx, c.of()))
			if k, ok := inst.runner.(interface{ Kill() }); ok {
				k.Kill() // a process: SIGKILL
			}
			r.endInstance(ctx, inst)
		},
		OnTerminate: func() {
			r.hist.log(time.Now(), fmt.Sprintf("instance %d%s terminated: graceful shutdown", idx, c.of()))
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
	identity, lease := fmt.Sprintf("instance-%d", idx), leaseName(c.ctl.Name())
	if !c.primary() {
		identity, lease = fmt.Sprintf("%s-instance-%d", c.name, idx), leaseName(c.name)
	}
	in := Instance{Index: idx, Identity: identity, Namespace: r.env.Namespace,
		Settings: maps.Clone(c.spec.Settings), Log: r.opts.Log, Recorder: recorder, CacheTransform: r.caches.transform(idx)}
	if err := r.clients(&in, inj, c); err != nil {
		return err
	}
	if out, ok := c.ctl.(OutOfProcess); ok && out.NeedsKubeconfig() {
		if in.Kubeconfig, err = r.proxy(idx, inj, c); err != nil {
			return err
		}
	}
	if c.spec.Instances > 1 {
		ld := time.Duration(c.spec.LeaseDuration)
		in.LeaderElection = &LeaderElection{Namespace: r.env.Namespace, Name: lease, Identity: in.Identity,
			LeaseDuration: ld, RenewDeadline: ld * 2 / 3, RetryPeriod: ld / 7}
		inst.elects = true
	}
	var runner Runner
	workqueues.Within(&inst.queues, func() { runner, err = c.ctl.New(in) })
	if err != nil {
		return fmt.Errorf("building instance %d%s: %w", idx, c.of(), err)
	}
	inst.runner = runner
	r.mu.Lock()
	r.instances[idx] = inst
	r.injectors = append(r.injectors, inj)
	r.mu.Unlock()
	inj.Start(instCtx)
	r.hist.started(idx, c.name, time.Now())
	r.hist.log(time.Now(), fmt.Sprintf("instance %d%s started", idx, c.of()))
	// Not in r.wg: an instance that never returns must not hold up the
	// run's end (stopInstances waits for it with a grace, and says so).
	go func() {
		defer close(inst.done)
		defer func() {
			if p := recover(); p != nil {
				r.hist.find(check.Finding(InvNoPanic, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d%s panicked: %v", idx, c.of(), p)))
			}
		}()
		var err error
		workqueues.Within(&inst.queues, func() { err = runner.Run(instCtx) })
		switch {
		case errors.Is(err, errUncleanExit):
			r.hist.find(check.Finding(InvCleanShutdown, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d%s %v", idx, c.of(), err)))
		case err != nil && !errors.Is(err, context.Canceled):
			r.hist.log(time.Now(), fmt.Sprintf("instance %d%s ended: %v", idx, c.of(), err))
		}
	}()
	return nil
}

// proxy starts the fault proxy of an out-of-process instance of c (closed
// when the run ends) and returns the kubeconfig that reaches it, as c's
// identity. Its requests are recorded as they leave the proxy for the
// server.
func (r *run) proxy(idx int, inj *chaos.Injector, c *controllerRun) (string, error) {
	if r.env.ControllerConfig == nil || r.env.InProcess != nil {
		// The fake's REST door is in process: no listener to reach.
		return "", fmt.Errorf("the %s backend has no server for a controller binary to reach", r.opts.Backend.Name())
	}
	upstream := rest.CopyConfig(c.config)
	upstream.Wrap(recordHTTP(idx, c, r))
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
		if _, cp := chaos.PlaneOf(in.Fault); cp && in.Fault.Target().IsZero() {
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
	r.hist.ended(inst.index, time.Now())
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
		case <-time.After(instanceGrace):
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(inst.ctl.spec.RestartAfter)):
			if err := r.startInstance(ctx, inst.ctl); err != nil {
				r.hist.log(time.Now(), "restarting: "+err.Error())
			}
		}
		r.mu.Lock()
		r.restarting--
		r.mu.Unlock()
		r.hist.touch()
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
		case <-time.After(instanceGrace):
			r.hist.find(check.Finding(InvCleanShutdown, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d did not return within %v of its context ending", in.index, instanceGrace)))
			r.hist.log(time.Now(), "goroutines at that instant:\n"+goroutines())
		}
	}
}

// clients gives in, an instance of c, its clients: each through inj,
// recording every request. On fake the typed client is the fake clientset
// (door 1) and the config the in-memory API's REST door; both act as c's
// identity.
func (r *run) clients(in *Instance, inj *chaos.Injector, c *controllerRun) error {
	cfg := chaos.Configure(c.config, inj)
	cfg.Wrap(recordHTTP(in.Index, c, r))
	in.Config = cfg
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	in.Dynamic = dc
	if r.env.InProcess != nil {
		cs, err := r.typedClient(c)
		if err != nil {
			return err
		}
		if err := inj.InstallFake(&cs.Fake); err != nil {
			return err
		}
		recordFake(cs, in.Index, c, r)
		in.Client = cs
		return nil
	}
	in.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// leaseName is the Lease of a controller's instances: its name, as a
// DNS subdomain, and "-leader".
func leaseName(controller string) string {
	name := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			return c
		}
		if c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return '-'
	}, controller)
	return strings.Trim(name[:min(len(name), 200)], "-") + "-leader"
}
