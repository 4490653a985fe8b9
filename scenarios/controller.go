package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim"
)

// Controller is a controller under test, run in process: the harness
// builds one Instance per replica, each on its own clients through the
// fault layer, and runs it until its context ends. Anything that runs
// against the clients it is given and stops when its context ends can be
// one (see Manager for a controller-runtime manager).
//
// A Controller may also implement Identified (its RBAC, so that what a
// real cluster would refuse is refused) and Judged (its own invariants,
// goal and charts).
type Controller interface {
	// Name identifies the controller in results.
	Name() string
	// New builds one instance.
	New(in Instance) (Runner, error)
}

// Identified is a Controller that declares who it runs as: envtest and
// cluster apply its RBAC and authenticate it as the ServiceAccount, and
// fake authorizes each of its requests by the same rules.
type Identified interface {
	Identity() sim.Identity
}

// ConfigUser is a Controller whose instances reach the API through
// Instance.Config alone (a controller-runtime manager, generated
// clientsets): on fake, its faults are those of the HTTP layer, which the
// in-memory API's REST door passes through.
type ConfigUser interface {
	UsesConfig() bool
}

// OutOfProcess is a Controller whose instances run as processes: each gets
// a Kubeconfig that reaches the backend through the fault proxy.
type OutOfProcess interface {
	NeedsKubeconfig() bool
}

// OneAtATime is a Controller whose runs cannot overlap in one process:
// OneAtATime says why (a probe that reads state the whole process shares,
// say). scenariotest runs its scenarios one after another where it runs
// others side by side.
type OneAtATime interface {
	OneAtATime() string
}

// Judged is a Controller with checks of its own, built once per run.
type Judged interface {
	Judge() Judge
}

// Judge is a controller's own view of one run: it observes the world
// through the harness's unfaulted clients, sees each of the controller's
// writes, and says whether its part of the goal holds.
type Judge interface {
	// Invariants names what the judge may report broken.
	Invariants() []string
	// Start begins observing; it returns once its caches have synced.
	Start(ctx context.Context, v View) error
	// Wrote sees one successful write of the controller.
	Wrote(w Write)
	// Goal says whether the controller's part of the goal holds, and why
	// not. The harness asks again only once something happened: a
	// request, a watch event or state reported through the View, an
	// instance's start or end, a fault. A judge whose answer can move
	// otherwise reports what moved it through View.Event or View.State.
	Goal() (bool, string)
	// Needed is, per object, how many writes its history called for
	// (reported beside the writes made); nil when the judge cannot say.
	Needed() map[string]int
	// Stop ends what Start began.
	Stop()
}

// View is what a Judge observes a run through.
type View struct {
	// Client and Dynamic have full rights and no faults.
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
	// Find records a finding: a broken invariant with what it is about,
	// when, and the request or fault firing it follows. Only a check's
	// first finding counts.
	Find func(reports.Finding)
	// Violate records a broken invariant: when, the object, the request
	// that broke it ("" for an observed change) and what happened.
	Violate func(invariant string, at time.Time, object, request, detail string)
	// Event records a watch event the judge saw, for the timeline.
	Event func(reports.WatchEvent)
	// State records a charted state of an object.
	State func(reports.State)
	// Log adds a line to the run's log.
	Log func(at time.Time, what string)
}

// Write is one successful write of the controller.
type Write struct {
	reports.Request
	// GVR and Subresource of what was written, in Namespace.
	GVR         schema.GroupVersionResource
	Subresource string
	Namespace   string
	// PatchType and Patch, for a patch.
	PatchType types.PatchType
	Patch     []byte
	// Object is the object sent, for a create or an update.
	Object map[string]any
}

// Instance is what one replica of the controller gets.
type Instance struct {
	// Index counts instances from 0 in the order they started; a restart
	// is a new index.
	Index int
	// Identity is unique per instance, for leader election.
	Identity string
	// Namespace the run's objects live in.
	Namespace string
	// Config reaches the backend through the fault layer, as the
	// controller's identity: what to build a controller-runtime manager or
	// generated clientsets on. On fake it is the in-memory API's REST door.
	Config *rest.Config
	// Client reaches the backend through the fault layer (on fake, the
	// fake clientset: the fastest door).
	Client kubernetes.Interface
	// Dynamic is a dynamic client on Config.
	Dynamic dynamic.Interface
	// CacheTransform lets the harness see what the controller's informers
	// hold, to find a controller that modifies a cached object
	// (no-cache-mutation). Give it to the informers as their last
	// transform: informers.WithTransform(in.CacheTransform) on a factory,
	// or SetTransform on an informer; it returns the object as it is.
	// Manager does this for its cache. On the fake backend's typed client
	// the harness sees watch events without it.
	CacheTransform cache.TransformFunc
	// LeaderElection is set when the scenario runs more than one instance.
	LeaderElection *LeaderElection
	// Settings are the scenario's controller settings, as written.
	Settings map[string]string
	// Kubeconfig reaches the backend through the fault proxy, for a
	// controller out of process; empty on fake.
	Kubeconfig string
	// Log receives an out-of-process controller's output; Recorder its exit.
	Log      io.Writer
	Recorder chaos.Recorder
}

// LeaderElection is where and how instances elect a leader: a Lease per
// run, released when an instance stops.
type LeaderElection struct {
	Namespace, Name, Identity                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Runner is one running instance.
type Runner interface {
	Run(ctx context.Context) error
}

// Prober is a Runner that shows its inside: the harness samples it, and the
// goal requires a live instance with an empty queue. A Runner that is no
// Prober is probed from the client-go work queues with a name that its
// instance made, in New or in Run's goroutine (or anywhere while no other
// instance is in the process), through client-go's workqueue metrics,
// which converge receives in a test binary: depth, busy, items done as
// Reconciles and AddAfter and AddRateLimited as Retries, counted. An
// instance that elects a leader counts as leading once it has taken an
// item from its queues, or while nothing was added to them.
type Prober interface {
	Probe() Probe
}

// Probe is a Runner's inside at one instant.
type Probe struct {
	// Leading: the instance works (it leads, or elects no leader).
	Leading    bool
	QueueDepth int
	// Busy: some key is being worked on.
	Busy       bool
	Reconciles int64
	// Retries counts the keys put back after an error (AddRateLimited,
	// or a Reconcile's error or requeue), the run through.
	Retries int64
	// CountsRetries: Retries is kept as said, so a write a fault failed
	// and no retry followed was dropped (check retries-failed-writes);
	// without it, that check does not judge the controller.
	CountsRetries bool
}

// Command is a controller binary run out of process, through the fault
// proxy: each instance is the command line with {kubeconfig}, {namespace},
// {identity}, {leaseNamespace} and {leaseName} replaced. Crash and
// terminate faults are a real SIGKILL and SIGTERM; the exit is recorded.
// Its queue cannot be seen, so its goal is the world's fixed point alone.
type Command struct {
	Args []string
	// Grace between SIGTERM and SIGKILL. Zero means 30s.
	Grace time.Duration
}

// Name is the binary's base name.
func (c Command) Name() string {
	if len(c.Args) == 0 {
		return "command"
	}
	return filepath.Base(c.Args[0])
}

// NeedsKubeconfig: a binary reaches the server through a kubeconfig.
func (Command) NeedsKubeconfig() bool { return true }

// New returns a Runner that starts the binary when run.
func (c Command) New(in Instance) (Runner, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("command: empty command line")
	}
	if in.Kubeconfig == "" {
		return nil, errors.New("command: the backend has no server for a binary to reach")
	}
	leaseNS, leaseName := "", ""
	if in.LeaderElection != nil {
		leaseNS, leaseName = in.LeaderElection.Namespace, in.LeaderElection.Name
	}
	r := strings.NewReplacer("{kubeconfig}", in.Kubeconfig, "{namespace}", in.Namespace, "{identity}", in.Identity,
		"{leaseNamespace}", leaseNS, "{leaseName}", leaseName)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = r.Replace(a)
	}
	return &commandRunner{cfg: chaos.ProcessConfig{Path: args[0], Args: args[1:], Env: []string{"POD_NAME=" + in.Identity},
		Stdout: in.Log, Stderr: in.Log, Grace: c.Grace, Recorder: in.Recorder}}, nil
}

type commandRunner struct {
	cfg  chaos.ProcessConfig
	mu   sync.Mutex
	proc *chaos.Process
}

// Run starts the binary and, when ctx ends, sends it SIGTERM (SIGKILL after
// the grace). A binary that exits on its own ends Run with its exit.
func (c *commandRunner) Run(ctx context.Context) error {
	p, err := chaos.StartProcess(c.cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		if exit := p.Terminate(); !exit.WithinGrace {
			return fmt.Errorf("%w: %s", errUncleanExit, exit)
		}
		return nil
	case <-p.Done():
		return fmt.Errorf("exited on its own: %s", p.Exit())
	}
}

// Kill ends the process at once, as a crash.
func (c *commandRunner) Kill() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

var errUncleanExit = errors.New("did not exit within its grace after SIGTERM")
