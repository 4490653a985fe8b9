package mirror

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
)

// Defaults of Config.
const (
	DefaultWorkers = 2

	DefaultLeaseName     = "mirror-controller"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config configures a Controller. New fills the defaults documented on each
// field.
type Config struct {
	// Namespace is the one namespace the controller watches and writes in,
	// the one its Role grants. Required.
	Namespace string
	// Workers is the number of reconcile workers. Zero means 2.
	Workers int
	// LeaderElection, when set, makes Run reconcile only while it holds a
	// Lease.
	LeaderElection *LeaderElection
	// Bug plants one of the bugs Bugs lists. Empty means none.
	Bug Bug
	// CacheTransform is every informer's transform (a test harness's
	// view of the caches). Nil means none.
	CacheTransform cache.TransformFunc
}

// LeaderElection configures leader election on a coordination.k8s.io Lease,
// given up when Run stops.
type LeaderElection struct {
	// Namespace of the Lease. Empty means Config.Namespace, the only one the
	// Role grants.
	Namespace string
	// Name of the Lease. Empty means "mirror-controller".
	Name string
	// Identity of this instance. Required and unique among instances.
	Identity string
	// LeaseDuration is how long a standby waits before it takes over a Lease
	// that is not renewed. Zero means 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it stops
	// leading. Zero means 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to take or renew the Lease.
	// Zero means 2s.
	RetryPeriod time.Duration
}

// withDefaults returns a copy of c with its defaults filled, or an error
// naming every invalid field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	} else if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %v", c.Namespace, msgs))
	}
	switch {
	case c.Workers < 0:
		errs = append(errs, fmt.Errorf("workers must not be negative, got %d", c.Workers))
	case c.Workers == 0:
		c.Workers = DefaultWorkers
	}
	if c.Bug != "" && !slices.ContainsFunc(Bugs(), func(b BugInfo) bool { return b.Name == c.Bug }) {
		errs = append(errs, fmt.Errorf("unknown bug %q", c.Bug))
	}
	if c.LeaderElection != nil {
		le := *c.LeaderElection
		if le.Namespace == "" {
			le.Namespace = c.Namespace
		}
		if err := le.fill(); err != nil {
			errs = append(errs, fmt.Errorf("leader election: %w", err))
		}
		c.LeaderElection = &le
	}
	return c, errors.Join(errs...)
}

func (le *LeaderElection) fill() error {
	var errs []error
	if le.Identity == "" {
		errs = append(errs, errors.New("identity is required"))
	}
	if le.Name == "" {
		le.Name = DefaultLeaseName
	}
	for _, d := range []struct {
		v    *time.Duration
		def  time.Duration
		name string
	}{
		{&le.LeaseDuration, DefaultLeaseDuration, "lease duration"},
		{&le.RenewDeadline, DefaultRenewDeadline, "renew deadline"},
		{&le.RetryPeriod, DefaultRetryPeriod, "retry period"},
	} {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	// The bounds client-go's elector enforces, checked here so the error
	// comes from New and names these fields.
	if le.LeaseDuration <= le.RenewDeadline {
		errs = append(errs, fmt.Errorf("lease duration %v must be greater than renew deadline %v", le.LeaseDuration, le.RenewDeadline))
	}
	if float64(le.RenewDeadline) <= 1.2*float64(le.RetryPeriod) {
		errs = append(errs, fmt.Errorf("renew deadline %v must be greater than 1.2 x retry period %v", le.RenewDeadline, le.RetryPeriod))
	}
	return errors.Join(errs...)
}
