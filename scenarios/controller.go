package scenarios

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"

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
