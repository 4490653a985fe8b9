// Package scaler is this repository's deployment scaler as a controller
// under test: how it runs in a scenario (Controller), the checks only it
// needs (its judge: replicas within the max annotation, never scaling down,
// writing only replicas and its own annotations of labelled Deployments,
// and the policy's fixed point as its goal), the RBAC it runs as, and its
// catalogue of scenarios (catalogue/*.yaml, embedded).
//
// The engine (package scenarios) knows nothing of it: the scaler is one
// Controller among others, found by the tests and the CLI.
package scaler

import (
	"fmt"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim"
)

// Controller is the scaler under test. It reads the settings cooldown (a
// duration; zero means 10s) and workers (default 3).
type Controller struct{}

var (
	_ scenarios.Controller = Controller{}
	_ scenarios.Judged     = Controller{}
	_ scenarios.Identified = Controller{}
)

// Name is "scaler".
func (Controller) Name() string { return "scaler" }

// DefaultCooldown is the cooldown of a scenario that sets none.
const DefaultCooldown = 10 * time.Second

// Cooldown is the cooldown in settings.
func Cooldown(settings map[string]string) (time.Duration, error) {
	v, ok := settings["cooldown"]
	if !ok {
		return DefaultCooldown, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("setting cooldown: %q is not a duration like \"10s\"", v)
	}
	return d, nil
}

// Workers is the number of reconcile workers in settings (default the
// scaler's own, 3).
func Workers(settings map[string]string) (int, error) {
	v, ok := settings["workers"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("setting workers: %q is not a number of workers within 1..1000", v)
	}
	return n, nil
}

// LeaderElection converts the harness's leader election to the scaler's.
func LeaderElection(le *scenarios.LeaderElection) *controller.LeaderElectionConfig {
	if le == nil {
		return nil
	}
	return &controller.LeaderElectionConfig{Namespace: le.Namespace, Name: le.Name, Identity: le.Identity,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}
}

// New builds a scaler on in's client, limited to the run's namespace.
func (Controller) New(in scenarios.Instance) (scenarios.Runner, error) {
	cooldown, err := Cooldown(in.Settings)
	if err != nil {
		return nil, err
	}
	workers, err := Workers(in.Settings)
	if err != nil {
		return nil, err
	}
	c, err := controller.New(controller.Config{
		Namespace:      in.Namespace,
		Cooldown:       cooldown,
		Workers:        workers,
		LeaderElection: LeaderElection(in.LeaderElection),
	}, in.Client)
	if err != nil {
		return nil, err
	}
	return &runner{Controller: c}, nil
}

// Judge is the scaler's own checks, per run.
func (Controller) Judge() scenarios.Judge { return NewJudge() }

// ServiceAccount is the scaler's identity in a run.
const ServiceAccount = "converge-scaler"

// Identity is the scaler's ServiceAccount with what config/'s RBAC grants
// it, as one Role in the run's namespace (where a scenario's scaler works
// and holds its Lease), so that runs sharing a server do not share it.
func (Controller) Identity() sim.Identity {
	return sim.Identity{ServiceAccount: ServiceAccount, RBAC: []runtime.Object{
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: "converge-scaler"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "converge-scaler"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "converge-scaler"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount}},
		},
	}}
}

type runner struct{ *controller.Controller }

// Probe reads the scaler's own metrics.
func (s *runner) Probe() scenarios.Probe {
	families, err := s.Registry().Gather()
	if err != nil {
		return scenarios.Probe{}
	}
	p := scenarios.Probe{CountsRetries: true}
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

// Binary is the scaler's binary (cmd/scaler) run out of process through
// the fault proxy, judged and authorized as the scaler in process is.
type Binary struct{ scenarios.Command }

var (
	_ scenarios.Judged     = Binary{}
	_ scenarios.Identified = Binary{}
)

// Judge is the scaler's.
func (Binary) Judge() scenarios.Judge { return NewJudge() }

// Identity is the scaler's.
func (Binary) Identity() sim.Identity { return Controller{}.Identity() }

// For is the controller under test a scenario of the scaler's catalogue
// runs: the binary when it names a command, the scaler in process
// otherwise.
func For(s *scenarios.Scenario) scenarios.Controller {
	if len(s.Controller.Command) > 0 {
		return Binary{scenarios.Command{Args: s.Controller.Command}}
	}
	return Controller{}
}
