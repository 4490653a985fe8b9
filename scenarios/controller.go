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

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
)

// Controller is a controller under test, run in-process: the harness
// builds one Instance per replica, each on its own (faulted) client, and
// runs it until its context ends. Anything that runs against the clients
// it is given and stops when its context ends can be one.
type Controller interface {
	// Name identifies the controller in results.
	Name() string
	// New builds one instance.
	New(in Instance) (Runner, error)
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
	// Client reaches the backend through the fault injector.
	Client kubernetes.Interface
	// Cooldown between two scale-ups of one Deployment.
	Cooldown time.Duration
	// LeaderElection is set when the scenario runs more than one instance.
	LeaderElection *controller.LeaderElectionConfig
	// Kubeconfig reaches the backend through the fault proxy, for a
	// controller out of process; empty on fake.
	Kubeconfig string
	// Log receives an out-of-process controller's output; Recorder its exit.
	Log      io.Writer
	Recorder chaos.Recorder
}

// Runner is one running instance.
type Runner interface {
	Run(ctx context.Context) error
}

// Prober is a Runner that shows its inside: the harness samples it, and the
// goal requires a live instance with an empty queue.
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
	Retries    int64
}

// Scaler is the default controller under test: this repository's scaler.
type Scaler struct{}

// Name is "scaler".
func (Scaler) Name() string { return "scaler" }

// New builds a scaler on in's client, limited to the run's namespace.
func (Scaler) New(in Instance) (Runner, error) {
	c, err := controller.New(controller.Config{
		Namespace:      in.Namespace,
		Cooldown:       in.Cooldown,
		LeaderElection: in.LeaderElection,
	}, in.Client)
	if err != nil {
		return nil, err
	}
	return &scalerRunner{Controller: c}, nil
}

type scalerRunner struct{ *controller.Controller }

// Probe reads the scaler's own metrics.
func (s *scalerRunner) Probe() Probe {
	families, err := s.Registry().Gather()
	if err != nil {
		return Probe{}
	}
	var p Probe
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "converge_scaler_leader":
				p.Leading = m.GetGauge().GetValue() == 1
			case "workqueue_depth":
				p.QueueDepth += int(m.GetGauge().GetValue())
			case "workqueue_unfinished_work_seconds":
				p.Busy = p.Busy || m.GetGauge().GetValue() > 0
			case "converge_scaler_reconciles_total":
				p.Reconciles += int64(counter(m))
			case "workqueue_retries_total":
				p.Retries += int64(counter(m))
			}
		}
	}
	return p
}

func counter(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

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
