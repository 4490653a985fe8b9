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
)

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
		if _, cp := chaos.PlaneOf(in.Fault); !cp || !in.Fault.Target().IsZero() {
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
		// The first instances start with the run; any later one replaced
		// one that ended.
		Restarted: idx >= r.s.Controller.Instances,
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
	in := Instance{Index: idx, Identity: fmt.Sprintf("instance-%d", idx), Namespace: r.env.Namespace,
		Settings: maps.Clone(r.s.Controller.Settings), Log: r.opts.Log, Recorder: r.hist, CacheTransform: r.caches.transform(idx)}
	if err := r.clients(&in, inj); err != nil {
		return err
	}
	if out, ok := r.opts.Controller.(OutOfProcess); ok && out.NeedsKubeconfig() {
		if in.Kubeconfig, err = r.proxy(idx, inj); err != nil {
			return err
		}
	}
	if r.s.Controller.Instances > 1 {
		ld := time.Duration(r.s.Controller.LeaseDuration)
		in.LeaderElection = &LeaderElection{Namespace: r.env.Namespace, Name: leaseName(r.opts.Controller.Name()), Identity: in.Identity,
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
	r.hist.started(idx, time.Now())
	r.hist.log(time.Now(), fmt.Sprintf("instance %d started", idx))
	// Not in r.wg: an instance that never returns must not hold up the
	// run's end (stopInstances waits for it with a grace, and says so).
	go func() {
		defer close(inst.done)
		defer func() {
			if p := recover(); p != nil {
				r.hist.find(check.Finding(InvNoPanic, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d panicked: %v", idx, p)))
			}
		}()
		err := runner.Run(instCtx)
		switch {
		case errors.Is(err, errUncleanExit):
			r.hist.find(check.Finding(InvCleanShutdown, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d %v", idx, err)))
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
	if r.env.ControllerConfig == nil || r.env.InProcess != nil {
		// The fake's REST door is in process: no listener to reach.
		return "", fmt.Errorf("the %s backend has no server for a controller binary to reach", r.opts.Backend.Name())
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
		case <-time.After(stopGrace):
			r.hist.find(check.Finding(InvCleanShutdown, time.Now(), reports.Subject{}, nil, fmt.Sprintf("instance %d did not return within %v of its context ending", in.index, stopGrace)))
			r.hist.log(time.Now(), "goroutines at that instant:\n"+goroutines())
		}
	}
}

// clients gives in its clients: each through inj, recording every
// request. On fake the typed client is the fake clientset (door 1) and the
// config the in-memory API's REST door; both act as the controller's
// identity.
func (r *run) clients(in *Instance, inj *chaos.Injector) error {
	cfg := chaos.Configure(r.env.ControllerConfig, inj)
	cfg.Wrap(recordHTTP(in.Index, r))
	in.Config = cfg
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	in.Dynamic = dc
	if r.env.InProcess != nil {
		cs, err := r.env.InProcess.NewControllerClient()
		if err != nil {
			return err
		}
		if err := inj.InstallFake(&cs.Fake); err != nil {
			return err
		}
		recordFake(cs, in.Index, r)
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
