package scenarios

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim/world"
)

// Duration is a time.Duration written as "30s" in scenario files.
type Duration = reports.Duration

// Scenario is one situation the controller must converge from. It is data:
// the same struct as a YAML file (see Parse).
type Scenario struct {
	// Name is unique in a catalogue, lower-case words joined by dashes.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Catches names the broken behaviour a failure of this scenario
	// reveals.
	Catches string `json:"catches"`
	// Backends it runs on: fake, envtest, cluster. Empty means fake and
	// envtest.
	Backends []string `json:"backends,omitempty"`

	Workload  Workload  `json:"workload"`
	Readiness Readiness `json:"readiness,omitempty"`
	// Faults are injected into the controller's clients (and, for
	// apiserver-restart and compaction, into the control plane).
	Faults []chaos.Spec `json:"faults,omitempty"`
	// Interference is what other actors do meanwhile.
	Interference Interference   `json:"interference,omitempty"`
	Controller   ControllerSpec `json:"controller,omitempty"`
	Timing       Timing         `json:"timing,omitempty"`
	Budgets      Budgets        `json:"budgets,omitempty"`
}

// Workload is the Deployments the harness creates at the start.
type Workload struct {
	// Deployments managed by the scaler (labelled), named <prefix>-<i>.
	// Zero means 1.
	Deployments int `json:"deployments,omitempty"`
	// Prefix of their names. Empty means "web".
	Prefix string `json:"prefix,omitempty"`
	// Replicas each starts with. Zero means 2.
	Replicas int32 `json:"replicas,omitempty"`
	// MaxReplicas is each one's max-replicas annotation. Zero means 16.
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// Unmanaged Deployments (no opt-in label), which the scaler must never
	// write, named <prefix>-unmanaged-<i>.
	Unmanaged int `json:"unmanaged,omitempty"`
	// Labels added to every Deployment and its pods.
	Labels map[string]string `json:"labels,omitempty"`
	// Image of the pod template. Empty means registry.invalid/app:1.
	Image string `json:"image,omitempty"`
}

// Readiness is the world's readiness model (world.Model) as a file writes
// it.
type Readiness struct {
	Kind     string   `json:"kind,omitempty"`
	Delay    Duration `json:"delay,omitempty"`
	Jitter   Duration `json:"jitter,omitempty"`
	Fraction float64  `json:"fraction,omitempty"`
	Period   Duration `json:"period,omitempty"`
	PerNode  int      `json:"perNode,omitempty"`
}

// Model is r as the world takes it; the zero Readiness is ready after 2s.
func (r Readiness) Model() world.Model {
	if r == (Readiness{}) {
		return world.Model{Kind: world.ReadyAfterDelay, Delay: 2 * time.Second}
	}
	return world.Model{Kind: r.Kind, Delay: time.Duration(r.Delay), Jitter: time.Duration(r.Jitter),
		Fraction: r.Fraction, Period: time.Duration(r.Period), PerNode: r.PerNode}
}

// Interference is what actors other than the controller do during the run.
type Interference struct {
	// LabelEditsEvery: a second writer edits a label of one managed
	// Deployment (round robin) this often, competing with the controller's
	// writes. Zero means never.
	LabelEditsEvery Duration `json:"labelEditsEvery,omitempty"`
	// LabelEditsUntil stops the second writer. Zero means half the
	// deadline.
	LabelEditsUntil Duration `json:"labelEditsUntil,omitempty"`
	// PodDeletionsEvery: an evictor deletes one pod of a managed
	// Deployment (round robin) this often, until LabelEditsUntil's
	// counterpart PodDeletionsUntil. Zero means never.
	PodDeletionsEvery Duration `json:"podDeletionsEvery,omitempty"`
	// PodDeletionsUntil stops the evictor. Zero means half the deadline.
	PodDeletionsUntil Duration `json:"podDeletionsUntil,omitempty"`
}

// ControllerSpec is how the controller under test runs.
type ControllerSpec struct {
	// Instances run side by side; more than one elects a leader. Zero
	// means 1.
	Instances int `json:"instances,omitempty"`
	// Cooldown between two scale-ups of one Deployment. Zero means 10s.
	Cooldown Duration `json:"cooldown,omitempty"`
	// RestartAfter: an instance ended by a crash or terminate fault is
	// replaced this long after. Zero means 5s.
	RestartAfter Duration `json:"restartAfter,omitempty"`
	// LeaseDuration of leader election. Zero means 15s.
	LeaseDuration Duration `json:"leaseDuration,omitempty"`
	// StartAfter starts the controller this long after the workload was
	// created, on a world that has settled. Zero: at once.
	StartAfter Duration `json:"startAfter,omitempty"`
	// Command runs a controller binary out of process, through the fault
	// proxy, instead of the scaler in process (envtest and cluster). Its
	// arguments may use {kubeconfig}, {namespace}, {identity},
	// {leaseNamespace} and {leaseName}.
	Command []string `json:"command,omitempty"`
}

// Timing bounds the run.
type Timing struct {
	// Deadline: the goal must have held for Settle before it. Zero means
	// 5m.
	Deadline Duration `json:"deadline,omitempty"`
	// Settle is how long the goal must hold. Zero means 30s.
	Settle Duration `json:"settle,omitempty"`
}

// Budgets fail a run that converged too expensively. Zero means no budget.
type Budgets struct {
	// WritesPerDeployment caps the controller's successful writes of any
	// one Deployment.
	WritesPerDeployment int `json:"writesPerDeployment,omitempty"`
	// WriteAmplification caps writes divided by the writes needed (one per
	// replica change), per Deployment.
	WriteAmplification float64 `json:"writeAmplification,omitempty"`
	// Reconciles caps the reconciles of all instances together.
	Reconciles int64 `json:"reconciles,omitempty"`
	// Requests caps the controller's requests by verb ("list": 10).
	Requests map[string]int `json:"requests,omitempty"`
}

// Backends.
const (
	Fake    = "fake"
	Envtest = "envtest"
	Cluster = "cluster"
)

// withDefaults returns s with its zero values filled.
func (s Scenario) withDefaults() Scenario {
	if len(s.Backends) == 0 {
		s.Backends = []string{Fake, Envtest}
	}
	w := &s.Workload
	w.Deployments = or(w.Deployments, 1)
	w.Prefix = or(w.Prefix, "web")
	w.Replicas = or(w.Replicas, 2)
	w.MaxReplicas = or(w.MaxReplicas, 16)
	w.Image = or(w.Image, "registry.invalid/app:1")
	c := &s.Controller
	c.Instances = or(c.Instances, 1)
	c.Cooldown = or(c.Cooldown, Duration(10*time.Second))
	c.RestartAfter = or(c.RestartAfter, Duration(5*time.Second))
	c.LeaseDuration = or(c.LeaseDuration, Duration(15*time.Second))
	s.Timing.Deadline = or(s.Timing.Deadline, Duration(5*time.Minute))
	s.Timing.Settle = or(s.Timing.Settle, Duration(30*time.Second))
	if s.Interference.LabelEditsEvery > 0 && s.Interference.LabelEditsUntil == 0 {
		s.Interference.LabelEditsUntil = s.Timing.Deadline / 2
	}
	if s.Interference.PodDeletionsEvery > 0 && s.Interference.PodDeletionsUntil == 0 {
		s.Interference.PodDeletionsUntil = s.Timing.Deadline / 2
	}
	return s
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// fieldError is a validation error at a field path ("workload.replicas"),
// which Parse turns into a file line.
type fieldError struct {
	path string
	msg  string
}

func (e fieldError) Error() string { return e.path + ": " + e.msg }

// Bounds that make every valid scenario finish in bounded time and memory.
// A scenario past them is refused when it is loaded, with the bound named.
const (
	MaxNameLength  = 50
	MaxDeployments = 5000
	MaxUnmanaged   = 5000
	MaxReplicas    = 1000
	// MaxPods bounds the pods the workload can ask for: every managed
	// Deployment at its max and every unmanaged one at its replicas.
	MaxPods = 100_000
	// MinInterval is the shortest period of a repeated action (label
	// edits, pod deletions, readiness flaps, a repeated fault): well above
	// the clock's resolution, so virtual time moves.
	MinInterval = 10 * time.Millisecond
	// MaxDeadline bounds a run's simulated time.
	MaxDeadline  = 24 * time.Hour
	MaxInstances = 10
	MaxFaults    = 100
	MaxLabels    = 32
	MaxCommand   = 100
)

// Validate checks every field and returns all that is wrong.
func (s Scenario) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fieldError{path, fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Name == "":
		bad("name", "required")
	case len(s.Name) > MaxNameLength:
		bad("name", "at most %d characters, got %d", MaxNameLength, len(s.Name))
	case len(validation.IsDNS1123Label(s.Name)) > 0:
		bad("name", "%q: use lower-case letters, digits and dashes, starting and ending with a letter or digit", s.Name)
	}
	if s.Catches == "" {
		bad("catches", "say which broken behaviour this scenario catches")
	}
	for i, b := range s.Backends {
		if !slices.Contains([]string{Fake, Envtest, Cluster}, b) {
			bad(fmt.Sprintf("backends[%d]", i), "unknown backend %q (fake, envtest, cluster)", b)
		}
	}
	w, def := s.Workload, s.withDefaults()
	if w.Deployments < 0 || w.Deployments > MaxDeployments {
		bad("workload.deployments", "must be within 0..%d, got %d", MaxDeployments, w.Deployments)
	}
	if w.Unmanaged < 0 || w.Unmanaged > MaxUnmanaged {
		bad("workload.unmanaged", "must be within 0..%d, got %d", MaxUnmanaged, w.Unmanaged)
	}
	if w.Replicas < 0 || w.Replicas > MaxReplicas {
		bad("workload.replicas", "must be within 0..%d, got %d", MaxReplicas, w.Replicas)
	}
	if w.MaxReplicas < 0 || w.MaxReplicas > MaxReplicas {
		bad("workload.maxReplicas", "must be within 0..%d, got %d", MaxReplicas, w.MaxReplicas)
	} else if w.Replicas > 0 && w.MaxReplicas > 0 && w.MaxReplicas < w.Replicas {
		bad("workload.maxReplicas", "%d is below replicas %d", w.MaxReplicas, w.Replicas)
	}
	if d := def.Workload; d.Deployments >= 0 && d.Unmanaged >= 0 && d.Replicas >= 0 && d.MaxReplicas >= 0 {
		if pods := int64(d.Deployments)*int64(d.MaxReplicas) + int64(d.Unmanaged)*int64(d.Replicas); pods > MaxPods {
			bad("workload", "asks for up to %d pods (deployments x maxReplicas + unmanaged x replicas), at most %d", pods, MaxPods)
		}
		// The longest name the workload makes: <prefix>-unmanaged-<i>.
		longest := fmt.Sprintf("%s-unmanaged-%d", d.Prefix, max(d.Deployments, d.Unmanaged))
		if msgs := validation.IsDNS1123Label(strings.TrimSuffix(d.Prefix, "-")); w.Prefix != "" && len(msgs) > 0 {
			bad("workload.prefix", "%q: %s", w.Prefix, strings.Join(msgs, "; "))
		} else if len(longest) > 50 {
			bad("workload.prefix", "%q makes names of up to %d characters (%s), at most 50 leave room for pod names", w.Prefix, len(longest), longest)
		}
	}
	if len(w.Labels) > MaxLabels {
		bad("workload.labels", "at most %d labels, got %d", MaxLabels, len(w.Labels))
	}
	for _, k := range sortedKeys(w.Labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			bad("workload.labels."+k, "key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(w.Labels[k]) {
			bad("workload.labels."+k, "value %q: %s", w.Labels[k], msg)
		}
	}
	if len(w.Image) > 1024 || strings.ContainsAny(w.Image, " \t\n\r") {
		bad("workload.image", "an image reference without spaces, at most 1024 characters")
	}
	if s.Readiness != (Readiness{}) {
		r := s.Readiness
		if err := r.Model().Validate(); err != nil {
			bad("readiness", "%v", err)
		}
		if r.Period != 0 && time.Duration(r.Period) < MinInterval {
			bad("readiness.period", "at least %v, got %v", MinInterval, time.Duration(r.Period))
		}
		if r.Delay > Duration(MaxDeadline) || r.Jitter > Duration(MaxDeadline) || r.Period > Duration(MaxDeadline) {
			bad("readiness", "delay, jitter and period must be at most %v", MaxDeadline)
		}
		if r.PerNode > MaxReplicas {
			bad("readiness.perNode", "at most %d, got %d", MaxReplicas, r.PerNode)
		}
	}
	if len(s.Faults) > MaxFaults {
		bad("faults", "at most %d faults, got %d", MaxFaults, len(s.Faults))
	}
	for i, f := range s.Faults {
		if i >= MaxFaults {
			break
		}
		path := fmt.Sprintf("faults[%d]", i)
		if _, err := f.Build(); err != nil {
			bad(path, "%v", err)
		}
		if e := f.When.Every; e != 0 && e < MinInterval {
			bad(path+".when.every", "at least %v, got %v", MinInterval, e)
		}
		if f.When.After > MaxDeadline || f.When.Until > MaxDeadline || f.When.Every > MaxDeadline || f.Delay > MaxDeadline {
			bad(path, "after, until, every and delay must be at most %v", MaxDeadline)
		}
		if t := f.Target; len(t.Resource) > 63 || len(t.Namespace) > 63 || len(t.Name) > 253 {
			bad(path+".target", "a resource or namespace of at most 63 characters and a name of at most 253, as a server takes")
		}
		if len(f.Target.Verbs) > 8 {
			bad(path+".target.verbs", "at most 8 verbs, got %d", len(f.Target.Verbs))
		}
		if f.RetryAfter > 3600 {
			bad(path+".retryAfter", "at most 3600 seconds, got %d", f.RetryAfter)
		}
	}
	in := s.Interference
	if in.LabelEditsEvery < 0 || in.LabelEditsUntil < 0 || in.PodDeletionsEvery < 0 || in.PodDeletionsUntil < 0 {
		bad("interference", "durations must not be negative")
	}
	if in.LabelEditsEvery > 0 && time.Duration(in.LabelEditsEvery) < MinInterval {
		bad("interference.labelEditsEvery", "at least %v, got %v", MinInterval, time.Duration(in.LabelEditsEvery))
	}
	if in.PodDeletionsEvery > 0 && time.Duration(in.PodDeletionsEvery) < MinInterval {
		bad("interference.podDeletionsEvery", "at least %v, got %v", MinInterval, time.Duration(in.PodDeletionsEvery))
	}
	c := s.Controller
	if c.Instances < 0 || c.Instances > MaxInstances {
		bad("controller.instances", "must be within 0..%d, got %d", MaxInstances, c.Instances)
	}
	if len(c.Command) > MaxCommand {
		bad("controller.command", "at most %d arguments, got %d", MaxCommand, len(c.Command))
	}
	if len(c.Command) > 0 && slices.Contains(s.Backends, Fake) {
		bad("controller.command", "a controller binary needs a server to reach: list backends without fake")
	}
	if len(c.Command) > 0 && len(s.Backends) == 0 {
		bad("controller.command", "a controller binary needs a server to reach: set backends (envtest, cluster)")
	}
	if c.Cooldown < 0 || c.RestartAfter < 0 || c.LeaseDuration < 0 || c.StartAfter < 0 {
		bad("controller", "durations must not be negative")
	}
	if c.Cooldown > Duration(MaxDeadline) || c.RestartAfter > Duration(MaxDeadline) || c.LeaseDuration > Duration(MaxDeadline) || c.StartAfter > Duration(MaxDeadline) {
		bad("controller", "durations must be at most %v", MaxDeadline)
	}
	if c.LeaseDuration != 0 && c.LeaseDuration < Duration(time.Second) {
		bad("controller.leaseDuration", "at least 1s, got %v", time.Duration(c.LeaseDuration))
	}
	if s.Timing.Deadline < 0 || s.Timing.Settle < 0 {
		bad("timing", "durations must not be negative")
	}
	if s.Timing.Deadline > Duration(MaxDeadline) {
		bad("timing.deadline", "at most %v, got %v", MaxDeadline, time.Duration(s.Timing.Deadline))
	}
	if d, st := def.Timing.Deadline, def.Timing.Settle; st >= d {
		bad("timing.settle", "the settle window (%v) must be shorter than the deadline (%v)", time.Duration(st), time.Duration(d))
	}
	b := s.Budgets
	if b.WritesPerDeployment < 0 || b.WriteAmplification < 0 || b.Reconciles < 0 {
		bad("budgets", "must not be negative")
	}
	if math.IsNaN(b.WriteAmplification) || math.IsInf(b.WriteAmplification, 0) {
		bad("budgets.writeAmplification", "must be a finite number")
	}
	for _, verb := range sortedKeys(b.Requests) {
		if n := b.Requests[verb]; n < 0 {
			bad("budgets.requests."+verb, "must not be negative, got %d", n)
		}
		if !slices.Contains(chaos.Verbs, verb) {
			bad("budgets.requests."+verb, "unknown verb (known: %s)", strings.Join(chaos.Verbs, ", "))
		}
	}
	if f := s.Readiness.Fraction; math.IsNaN(f) || math.IsInf(f, 0) {
		bad("readiness.fraction", "must be a finite number")
	}
	return errors.Join(errs...)
}

// RunsOnBackends returns the backends the scenario runs on, defaults
// filled.
func (s Scenario) RunsOnBackends() []string { return s.withDefaults().Backends }

// RunsOn reports whether the scenario runs on backend.
func (s Scenario) RunsOn(backend string) bool {
	return slices.Contains(s.withDefaults().Backends, backend)
}

// Plan builds the fault injections.
func (s Scenario) injections() ([]chaos.Injection, error) {
	var out []chaos.Injection
	for i, f := range s.Faults {
		in, err := f.Build()
		if err != nil {
			return nil, fmt.Errorf("faults[%d]: %w", i, err)
		}
		out = append(out, in)
	}
	return out, nil
}
