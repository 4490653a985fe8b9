package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Labels and annotations the scaler reads and writes.
const (
	// LabelEnabled opts a Deployment in when its value is ValueEnabled.
	LabelEnabled = "converge.dev/scaler"
	// ValueEnabled is the value of LabelEnabled that opts a Deployment in.
	ValueEnabled = "enabled"
	// AnnotationMaxReplicas is the per-Deployment ceiling, a positive integer.
	AnnotationMaxReplicas = "converge.dev/max-replicas"
	// AnnotationLastScale is the RFC 3339 time of the scaler's last scale-up,
	// written in the same request as the replica change.
	AnnotationLastScale = "converge.dev/last-scale"
)

// FieldManager names the scaler's writes in managedFields.
const FieldManager = "converge-scaler"

// Defaults of Config.
const (
	DefaultWorkers       = 3
	DefaultCooldown      = 30 * time.Second
	DefaultMaxRetries    = 5
	DefaultMaxReplicas   = int32(10)
	DefaultShutdownGrace = 10 * time.Second
	DefaultQueueName     = "scaler"

	DefaultLeaseName     = "converge-scaler"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config configures a Controller. The zero value is valid; New fills the
// defaults documented on each field.
type Config struct {
	// Namespace limits the scaler to one namespace. Empty means all.
	Namespace string
	// Workers is the number of reconcile workers. Zero means 3.
	Workers int
	// Cooldown is the least time between two scale-ups of one Deployment.
	// Zero means 30s.
	Cooldown time.Duration
	// MaxRetries is how many times a failing key is retried with backoff
	// before it is tried only once per Cooldown. Zero means 5.
	MaxRetries int
	// DefaultMaxReplicas is the ceiling of a Deployment without the
	// max-replicas annotation. Zero means 10.
	DefaultMaxReplicas int32
	// ShutdownGrace bounds how long Run waits for in-flight reconciles once
	// its context ends. Zero means 10s.
	ShutdownGrace time.Duration
	// QueueName names the workqueue in metrics. Empty means "scaler".
	QueueName string
	// LeaderElection, when set, makes Run act only while it holds a Lease.
	LeaderElection *LeaderElectionConfig
	// Clock drives cooldowns, the workqueue and shutdown deadlines.
	// Nil means the real clock.
	Clock clock.WithTicker
	// Registerer receives the scaler's metrics. Nil means a private
	// registry, returned by Controller.Registry.
	Registerer prometheus.Registerer
	// EventRecorder, when set, receives the scaler's Events instead of the
	// API server. Nil means Run records Events through the client.
	EventRecorder record.EventRecorder
	// EventSource names the reporting component in Events. Empty means
	// "converge-scaler", with the leader identity as host when electing.
	EventSource string
}

// LeaderElectionConfig configures leader election on a coordination.k8s.io
// Lease. The Lease is released when Run's context ends.
type LeaderElectionConfig struct {
	// Namespace of the Lease. Required.
	Namespace string
	// Name of the Lease. Empty means "converge-scaler".
	Name string
	// Identity of this instance. Required and unique among instances.
	Identity string
	// LeaseDuration is how long a non-leader waits before taking over a
	// Lease that is not renewed. Zero means 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying to renew before
	// it gives up leading. Zero means 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to acquire or renew.
	// Zero means 2s.
	RetryPeriod time.Duration
}

// withDefaults returns a copy of c with zero values replaced by defaults,
// or an error that names every invalid field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %v", c.Namespace, msgs))
		}
	}
	c.Workers = orDefault(c.Workers, DefaultWorkers, "workers", &errs)
	c.MaxRetries = orDefault(c.MaxRetries, DefaultMaxRetries, "max retries", &errs)
	c.DefaultMaxReplicas = orDefault(c.DefaultMaxReplicas, DefaultMaxReplicas, "default max replicas", &errs)
	c.Cooldown = orDefault(c.Cooldown, DefaultCooldown, "cooldown", &errs)
	c.ShutdownGrace = orDefault(c.ShutdownGrace, DefaultShutdownGrace, "shutdown grace", &errs)
	if c.QueueName == "" {
		c.QueueName = DefaultQueueName
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.LeaderElection != nil {
		le, err := c.LeaderElection.withDefaults()
		if err != nil {
			errs = append(errs, fmt.Errorf("leader election: %w", err))
		}
		c.LeaderElection = &le
	}
	if c.EventSource == "" {
		c.EventSource = FieldManager
	}
	return c, errors.Join(errs...)
}

func (c LeaderElectionConfig) withDefaults() (LeaderElectionConfig, error) {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if c.Identity == "" {
		errs = append(errs, errors.New("identity is required"))
	}
	if c.Name == "" {
		c.Name = DefaultLeaseName
	}
	c.LeaseDuration = orDefault(c.LeaseDuration, DefaultLeaseDuration, "lease duration", &errs)
	c.RenewDeadline = orDefault(c.RenewDeadline, DefaultRenewDeadline, "renew deadline", &errs)
	c.RetryPeriod = orDefault(c.RetryPeriod, DefaultRetryPeriod, "retry period", &errs)
	// The same bounds client-go's elector enforces, checked here so the
	// error names our fields and arrives before Run.
	if c.LeaseDuration <= c.RenewDeadline {
		errs = append(errs, fmt.Errorf("lease duration %v must be greater than renew deadline %v", c.LeaseDuration, c.RenewDeadline))
	}
	if float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod) {
		errs = append(errs, fmt.Errorf("renew deadline %v must be greater than 1.2 x retry period %v", c.RenewDeadline, c.RetryPeriod))
	}
	return c, errors.Join(errs...)
}

func orDefault[T int | int32 | time.Duration](v, def T, name string, errs *[]error) T {
	switch {
	case v < 0:
		*errs = append(*errs, fmt.Errorf("%s must not be negative, got %v", name, v))
		return def
	case v == 0:
		return def
	}
	return v
}
