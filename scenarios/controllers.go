package scenarios

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	fakeclientset "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/sim"
)

// controllerRun is one controller of a run: the one under test, or one of
// the scenario's others. Each has its own identity, instances, clients and
// fault injectors; all share the backend.
type controllerRun struct {
	// name is "" for the controller under test, else its name among the
	// others: what the history marks its requests, lives and firings with.
	name string
	spec ControllerSpec // defaults filled
	ctl  Controller
	id   sim.Identity
	rbac []runtime.Object // id's, read and checked
	// config reaches the backend as id, before the fault layer: set once
	// the backend runs.
	config *rest.Config
	// plan are the injections of the faults that name this controller;
	// shared their counters and windows, across its instances.
	plan   []chaos.Injection
	shared chaos.Shared
	// started counts its instances started so far (under run.mu): the
	// first spec.Instances start with the run, any later one replaced
	// one that ended.
	started int
}

// primary: c is the controller under test.
func (c *controllerRun) primary() bool { return c.name == "" }

// of is " of labeler" for another controller, "" for the one under test:
// what the harness's log lines and findings add to an instance.
func (c *controllerRun) of() string {
	if c.primary() {
		return ""
	}
	return " of " + c.name
}

// resolveControllers pairs the scenario's controller specs (defaults
// filled) with their Go values and identities: the controller under test
// first, then the others in the scenario's order.
func resolveControllers(s *Scenario, opts Options) ([]*controllerRun, error) {
	primary, err := newControllerRun("controller", "", s.Controller, opts.Controller)
	if err != nil {
		return nil, err
	}
	all := []*controllerRun{primary}
	for i, spec := range s.Others {
		at := fmt.Sprintf("others[%d] (%s)", i, spec.Name)
		ctl := opts.Others[spec.Name]
		if ctl == nil && len(spec.Command) > 0 {
			ctl = Command{Args: spec.Command}
		}
		if ctl == nil {
			return nil, fmt.Errorf("%s: no controller: set Options.Others[%q], or give it a command", at, spec.Name)
		}
		if spec.Name == opts.Controller.Name() {
			return nil, fmt.Errorf("%s: named as the controller under test is: give it another name", at)
		}
		c, err := newControllerRun(at, spec.Name, spec, ctl)
		if err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Others)) {
		if !slices.ContainsFunc(s.Others, func(c ControllerSpec) bool { return c.Name == name }) {
			return nil, fmt.Errorf("Options.Others[%q]: the scenario runs no other of that name (others: %v): add {name: %s} to its others", name, otherNames(*s), name)
		}
	}
	return all, sameRBAC(all)
}

func newControllerRun(at, name string, spec ControllerSpec, ctl Controller) (*controllerRun, error) {
	c := &controllerRun{name: name, spec: spec, ctl: ctl}
	fromSpec, err := spec.identity()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	c.id = IdentityOf(ctl)
	switch {
	case !c.id.IsZero() && !fromSpec.IsZero():
		return nil, fmt.Errorf("%s: %s declares its own identity (Identified) and the scenario gives it a serviceAccount and rbac: keep one", at, ctl.Name())
	case c.id.IsZero():
		c.id = fromSpec
	}
	if c.rbac, err = c.id.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	return c, nil
}

// sameRBAC refuses two controllers that declare different RBAC objects of
// one name: applied in one namespace, the second would replace the first.
func sameRBAC(all []*controllerRun) error {
	type declared struct {
		by   string
		json []byte
	}
	seen := map[string]declared{}
	for _, c := range all {
		who := c.ctl.Name()
		if !c.primary() {
			who = c.name
		}
		for _, obj := range c.rbac {
			m, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			key := fmt.Sprintf("%T %s/%s", obj, m.GetNamespace(), m.GetName())
			data, _ := json.Marshal(obj)
			if d, ok := seen[key]; ok && d.by != who && string(d.json) != string(data) {
				return fmt.Errorf("controllers %s and %s both declare %s, differently: one would replace the other's; give each its own name", d.by, who, key)
			}
			seen[key] = declared{who, data}
		}
	}
	return nil
}

// bindFaults gives each controller the injections of the faults that name
// it (the controller under test those that name none); plan holds the
// injections of s.Faults in order.
func bindFaults(s *Scenario, plan []chaos.Injection, all []*controllerRun) {
	for i, in := range plan {
		for _, c := range all {
			if c.name == s.Faults[i].Controller {
				c.plan = append(c.plan, in)
			}
		}
	}
}

// faultController is the controller fault i of the scenario is bound to.
func (r *run) faultController(i int) *controllerRun {
	for _, c := range r.controllers {
		if c.name == r.s.Faults[i].Controller {
			return c
		}
	}
	return r.controllers[0]
}

// connect gives each other controller its config, as its identity: its
// RBAC applied in the run's namespace and, on a real API server, in force.
// The controller under test has the backend's (sim.Run.Controller).
func (r *run) connect(ctx context.Context) error {
	for _, c := range r.controllers {
		if c.primary() {
			c.config = r.env.ControllerConfig
			continue
		}
		if c.id.IsZero() {
			c.config = rest.CopyConfig(r.env.RESTConfig)
			continue
		}
		if err := c.id.ApplyRBAC(ctx, r.env.Observer, r.env.Namespace, c.rbac); err != nil {
			return fmt.Errorf("controller %s: %w", c.name, err)
		}
		if r.env.Can.Has(sim.RealAPIServer) {
			if err := c.id.WaitEffective(ctx, r.env.Observer, r.env.Namespace, c.rbac, 30*time.Second); err != nil {
				return fmt.Errorf("controller %s: %w", c.name, err)
			}
		}
		c.config = c.id.Config(r.env.RESTConfig, r.env.Namespace)
	}
	return nil
}

// clientAs is an in-process API that makes clientsets acting as any
// identity (sim/fake), for controllers other than the one under test.
type clientAs interface {
	NewClientAs(sim.Identity) (*fakeclientset.Clientset, error)
}

// typedClient is c's clientset on an in-process API, as its identity.
func (r *run) typedClient(c *controllerRun) (*fakeclientset.Clientset, error) {
	if c.primary() {
		return r.env.InProcess.NewControllerClient()
	}
	as, ok := r.env.InProcess.(clientAs)
	if !ok {
		return nil, fmt.Errorf("the %s backend cannot make a clientset acting as controller %s's identity", r.opts.Backend.Name(), c.name)
	}
	return as.NewClientAs(c.id)
}

// recorderOf records c's firings, marked with its name.
func (r *run) recorderOf(c *controllerRun) chaos.Recorder {
	if c.primary() {
		return r.hist
	}
	return markedRecorder{r.hist, c.name}
}

type markedRecorder struct {
	h    *history
	name string
}

func (m markedRecorder) Record(f chaos.Firing) {
	f.Controller = m.name
	m.h.Record(f)
}

// startControllers starts each controller's instances once its startAfter
// has passed (from now), the controller under test first among those due
// together. It returns once the controller under test's have started;
// others due later start meanwhile, and a failure to start them ends the
// run as the harness's error.
func (r *run) startControllers(ctx context.Context) error {
	t0 := time.Now()
	order := slices.Clone(r.controllers)
	slices.SortStableFunc(order, func(a, b *controllerRun) int { return cmp.Compare(a.spec.StartAfter, b.spec.StartAfter) })
	startAt := func(c *controllerRun) error {
		if wait := time.Until(t0.Add(time.Duration(c.spec.StartAfter))); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		for range c.spec.Instances {
			if err := r.startInstance(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
	for i, c := range order {
		if err := startAt(c); err != nil {
			return err
		}
		if !c.primary() {
			continue
		}
		for _, later := range order[i+1:] {
			r.wg.Go(func() {
				if err := startAt(later); err != nil && ctx.Err() == nil {
					r.fail(fmt.Errorf("starting controller %s: %w", later.name, err))
				}
			})
		}
		return nil
	}
	return nil
}
