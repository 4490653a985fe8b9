package scenarios

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/expect"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/world"
)

// Duration is a time.Duration written as "30s" in scenario files.
type Duration = reports.Duration

// Scenario is one situation the controller under test must converge from.
// It is data: the same struct as a YAML file (see Parse). Nothing in it is
// about one controller: the objects, the world, the invariants and the goal
// are the scenario's own, and a controller adds its own checks (see Judge).
type Scenario struct {
	// Name is unique in a catalogue, lower-case words joined by dashes.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Catches names the broken behaviour a failure of this scenario
	// reveals.
	Catches string `json:"catches"`
	// Backends it runs on, of the kinds package sim/backends lists (fake,
	// envtest, cluster). Empty means its defaults: fake and envtest.
	Backends []string `json:"backends,omitempty"`

	// Objects are created at the start, in order, CustomResourceDefinitions
	// first: what the run's namespace holds.
	Objects []Objects `json:"objects,omitempty"`
	// World is what the simulated cluster around the controller does.
	World World `json:"world,omitempty"`
	// Inputs say what input exploration (converge explore --inputs) may
	// change of the custom resources the scenario creates.
	Inputs Inputs `json:"inputs,omitempty"`
	// Faults are injected into the controller's clients (and, for
	// apiserver-restart and compaction, into the control plane). A fault
	// that names one of the others (controller: its name) is injected
	// into that controller's clients instead.
	Faults     []chaos.Spec   `json:"faults,omitempty"`
	Controller ControllerSpec `json:"controller,omitempty"`
	// Others are more controllers run beside the controller under test,
	// on the same API: a second controller of the user's, the scaler, an
	// operator. Each is named, runs as its own identity with its own
	// instances and clients, and is faulted only by the faults that name
	// it. The checks about the controller (writes-allowed, the budgets,
	// one-writer-at-a-time, retries-failed-writes, its own judge) judge
	// the controller under test alone; no-write-war catches two
	// controllers overwriting each other's value of one field. The Go
	// value of each comes from scenarios.Options.Others by name, unless
	// it gives a command.
	Others []ControllerSpec `json:"others,omitempty"`
	// Invariants must hold on every observed change of the objects they
	// select.
	Invariants []Invariant `json:"invariants,omitempty"`
	// Writes, when given, are all the controller may write: a successful
	// write no rule allows breaks the invariant writes-allowed.
	Writes []WriteRule `json:"writes,omitempty"`
	// Goal must hold, after the last fault, for the settle window.
	Goal Goal `json:"goal,omitempty"`
	// Allow names built-in invariants this scenario lets break (for
	// example no-forbidden-request, when a 403 is the point).
	Allow []string `json:"allow,omitempty"`
	// SkipProfiles are fault profiles this scenario is not run under when
	// a test asks for them (scenariotest.Options.Faults), by name, each
	// with its reason ("leader-failover: one replica only"): each such run
	// is a SKIP that says why.
	SkipProfiles map[string]string `json:"skipProfiles,omitempty"`
	Timing       Timing            `json:"timing,omitempty"`
	Budgets      Budgets           `json:"budgets,omitempty"`
}

// Objects are manifests the harness creates at the start: a file or folder
// of YAML documents (relative to the scenario file), or one manifest
// inline. With Count, each is created Count times, "{{index}}" in any of
// its strings replaced by 0..Count-1. "{{now}}", "{{now+5s}}" or
// "{{now-1h}}" in a string is the run's start, offset so, in RFC 3339
// (UTC, to the second): a manifest can say "five seconds from now".
type Objects struct {
	File     string `json:"file,omitempty"`
	Manifest Object `json:"manifest,omitempty"`
	Count    int    `json:"count,omitempty"`
	// Source is the file an entry's manifest was read from, once read.
	Source string `json:"source,omitempty"`
}

// Inputs are a user's say over the changes input exploration draws from
// the CRDs' schemas, by path in the resource (spec.replicas,
// spec.targets[0].port, spec.config["key"]): in every resource the
// scenario creates.
type Inputs struct {
	// Pin lists paths whose values no change may alter.
	Pin []string `json:"pin,omitempty"`
	// Exclude lists paths nothing is drawn at or under.
	Exclude []string `json:"exclude,omitempty"`
	// Values are values to try at a path, besides those drawn.
	Values map[string][]any `json:"values,omitempty"`
}

// MaxInputRules bounds the paths and values Inputs may list.
const MaxInputRules = 1_000

// World is the simulated cluster around the controller (package
// sim/world): Nodes whose kubelet runs pods by a readiness model, a
// scheduler, and, on fake, the Deployment controller; on fake the API
// itself collects garbage and finishes namespaces.
type World struct {
	// Nodes simulated. Zero means 3 (110 pods each).
	Nodes int `json:"nodes,omitempty"`
	// Readiness is when pods turn ready. Zero means 2s after they start.
	Readiness Readiness `json:"readiness,omitempty"`
	// NoScheduler leaves pending pods unscheduled.
	NoScheduler bool `json:"noScheduler,omitempty"`
	// NoDeployments leaves Deployments without pods on fake, where the
	// world plays their controller (envtest has kube-controller-manager).
	NoDeployments bool `json:"noDeployments,omitempty"`
	// Interference is what other actors do to the objects meanwhile.
	Interference []Interference `json:"interference,omitempty"`
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

// Interference is another actor acting on the objects Select matches, in
// turn (by name), every Every until Until: it sets a field (Set), sends a
// patch (Patch), or deletes the object (Delete). A write that meets a
// conflict is skipped, as a tool that does not retry would; one that does
// not reach a server that is down (a control-plane fault of the run) is
// tried again each second, and an actor that still owes its Count when
// Until comes ends the run as the harness's error.
type Interference struct {
	Every Duration `json:"every"`
	// After, from the start of the run, the actor begins: its first action
	// is at After + Every. Zero means at the start.
	After Duration `json:"after,omitempty"`
	// Until, from the start of the run. Zero means half the deadline.
	Until Duration `json:"until,omitempty"`
	// Count, when set, stops the actor after that many actions: a number
	// of edits that does not depend on how long the objects took to be
	// created.
	Count  int      `json:"count,omitempty"`
	Select Selector `json:"select"`
	// Set writes Value at Path (any JSON value: a label, a number of
	// replicas, a list), "{{n}}" in a string Value replaced by the count of
	// the action; or removes the field at Path. A write the API server
	// refuses for another reason than a conflict (the object changed under
	// the actor) or its absence ends the run as the harness's error, naming
	// the step and the server's answer: it is no verdict on the controller.
	Set *SetField `json:"set,omitempty"`
	// Patch sends a patch to the object, or to its subresource, refused
	// as Set's write is.
	Patch *PatchStep `json:"patch,omitempty"`
	// Delete deletes the object, at once (grace period 0).
	Delete bool `json:"delete,omitempty"`
	// Refused says Set's or Patch's write is one the API server must
	// refuse as invalid (a value the schema forbids): its refusal is
	// logged, and the server taking it ends the run as the harness's
	// error. Input exploration sends one in each run, to see that the
	// controller goes on as if it had not been sent.
	Refused bool `json:"refused,omitempty"`
	// Create creates this object (a manifest, namespaced into the run's
	// namespace; "{{n}}" in its strings is the count of the action), as
	// someone else would: an object of a name the controller used, made
	// again by another hand. It needs no select. While an object of that
	// name exists the actor waits, trying at each tick: Count bounds the
	// objects it made, so "count: 1" makes one, whenever its name is free.
	Create Object `json:"create,omitempty"`
}

// PatchStep is a patch an interfering actor sends.
type PatchStep struct {
	// Type is merge (a JSON merge patch, RFC 7386: an object; the
	// default) or json (a JSON patch, RFC 6902: a list of operations).
	Type string `json:"type,omitempty"`
	// Subresource, such as status, is patched instead of the object.
	Subresource string `json:"subresource,omitempty"`
	// Patch is the patch, written as YAML or JSON, at most 1024 bytes as
	// JSON. "{{n}}" in its strings is the count of the action, and
	// "{{now}}", "{{now+5s}}" or "{{now-1h}}" the instant of the write,
	// as in Set.
	Patch any `json:"patch"`
}

// The patch types a PatchStep names.
const (
	MergePatch = "merge"
	JSONPatch  = "json"
)

// SetField is a field an interfering actor writes, or removes.
type SetField struct {
	Path string `json:"path"`
	// Value is any JSON value: a string, a number, true or false, a list,
	// an object. "{{now}}", "{{now+5s}}" or "{{now-1h}}" in any of its
	// strings is the instant of the write, offset so, in RFC 3339 (UTC, to
	// the second).
	Value any `json:"value,omitempty"`
	// Remove removes the field at Path instead.
	Remove bool `json:"remove,omitempty"`
}

// Selector picks objects of one kind in the run (its namespace, for a
// namespaced kind): by name, by labels, or all of them.
type Selector struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
	// Labels is a label selector ("app=web,tier!=db").
	Labels string `json:"labels,omitempty"`
}

// Invariant is a named CEL expression that must be true of every observed
// version of the objects it selects. It may read object and, to judge a
// change, oldObject (the version observed before), as a CRD's transition
// rules do: a rule that names oldObject is judged on updates only.
//
// A rule that names objects is a rule across objects: objects maps each
// kind the rule names (objects.Deployment or objects['Deployment']; the
// scenario must watch it) to its objects
// in the run's namespace as they were at one instant, and the rule is
// judged of every selected object at every resourceVersion the observer
// saw, with every kind rebuilt from the recorded events up to exactly
// that resourceVersion: objects of different kinds are seen as the API
// server held them together, whatever order their informers delivered
// them in (package check). Kinds are keyed by name alone: a scenario that
// watches two kinds of one name in different groups cannot tell them
// apart there.
//
// An invariant that selects no object in a run, or is never true or false
// of one because each lacks a field its rule reads, proves nothing: it is
// reported as vacuous (check no-vacuous-check) and fails the test, unless
// MayBeVacuous.
//
// A rule, and a goal's condition, is checked when the scenario is loaded
// against the schema of the kinds it reads: the structural schema of a
// CRD among the scenario's objects, or the Go type of a kind client-go
// knows. A field no such object can hold (object.spec.replica of a
// Deployment, in has() too) is refused there, with its line and column;
// so is one a goal's match or an interfering actor sets, and a write
// rule's field (up to the parent of a prefix such as spec.repl*). Keys of
// maps (labels, a ConfigMap's data), fields below
// x-kubernetes-preserve-unknown-fields and kinds of neither are not
// checked: a typo there is found in the run, as vacuous.
type Invariant struct {
	Name   string   `json:"name"`
	Select Selector `json:"select"`
	Rule   string   `json:"rule"`
	// MayBeVacuous lets a run leave the invariant untried: its objects may
	// not exist, or not carry the fields it reads.
	MayBeVacuous bool `json:"mayBeVacuous,omitempty"`
}

// WriteRule allows the controller writes of the objects it selects: by
// verb (empty: any), and for updates and patches, of the fields it lists
// (paths like spec.replicas or metadata.annotations["a/b"]; a path allows
// what lies under it, and a trailing * any key starting so). Empty Fields
// allow any field.
type WriteRule struct {
	Select Selector `json:"select"`
	Verbs  []string `json:"verbs,omitempty"`
	Fields []string `json:"fields,omitempty"`
	// MayBeVacuous lets a run make no write the rule selects; else such a
	// run reports the rule as vacuous (no-vacuous-check), which fails the
	// test.
	MayBeVacuous bool `json:"mayBeVacuous,omitempty"`
}

// Goal is what the world looks like once the controller has converged.
type Goal struct {
	// Objects: each expectation must hold.
	Objects []Expectation `json:"objects,omitempty"`
	// Busy, when true, lets the controller write during the settle window;
	// by default a write (other than of its Leases and Events) restarts it.
	Busy bool `json:"busy,omitempty"`
}

// Expectation is a partial object and a condition the objects Select
// matches must satisfy, or how many of them there must be. A named object
// that does not exist does not satisfy it (not yet); a field that is not
// there yet makes a condition false, not an error.
type Expectation struct {
	Select Selector `json:"select"`
	// Match is a partial object: maps match on the keys it gives, lists
	// when each of its elements matches a distinct element, in any order
	// (package expect).
	Match Object `json:"match,omitempty"`
	// Condition is a CEL expression over object, and over objects as an
	// invariant's rule reads them (objects.Deployment: every Deployment
	// seen at that instant), judged at each poll of the goal.
	Condition string `json:"condition,omitempty"`
	// Count, when set, is how many objects Select must match (0: none
	// left).
	Count *int `json:"count,omitempty"`
}

// ControllerSpec is how the controller under test runs, or one of the
// others run beside it.
type ControllerSpec struct {
	// Name names one of the others: faults and Options.Others name it so,
	// and the history marks its requests, instances and faults with it.
	// Required for the others, lower-case letters, digits and dashes;
	// the controller under test has none (its Go value names it).
	Name string `json:"name,omitempty"`
	// ServiceAccount and RBAC are who the controller runs as, for one
	// whose Go value declares no identity (see Identified) or a command:
	// RBAC are ServiceAccounts, Roles, ClusterRoles and their bindings (a
	// file, relative to the scenario file, or a manifest each), applied
	// in the run's namespace, and every request of the controller is
	// authorized by them, as a real cluster would. A controller with
	// neither runs with full rights, and the result says so.
	ServiceAccount string    `json:"serviceAccount,omitempty"`
	RBAC           []Objects `json:"rbac,omitempty"`
	// Instances run side by side; more than one elects a leader. Zero
	// means 1.
	Instances int `json:"instances,omitempty"`
	// RestartAfter: an instance ended by a crash or terminate fault is
	// replaced this long after. Zero means 5s.
	RestartAfter Duration `json:"restartAfter,omitempty"`
	// LeaseDuration of leader election. Zero means 15s.
	LeaseDuration Duration `json:"leaseDuration,omitempty"`
	// StartAfter starts the controller this long after the objects were
	// created, on a world that has settled. Zero: at once.
	StartAfter Duration `json:"startAfter,omitempty"`
	// Settings are handed to every instance as they are written (the
	// scaler reads cooldown).
	Settings map[string]string `json:"settings,omitempty"`
	// Command runs a controller binary out of process, through the fault
	// proxy, instead of one in process (envtest and cluster). Its
	// arguments may use {kubeconfig}, {namespace}, {identity},
	// {leaseNamespace} and {leaseName}.
	Command []string `json:"command,omitempty"`
}

// Timing bounds the run.
type Timing struct {
	// Deadline: the goal must have held for Settle before it. Zero means
	// DefaultDeadline, 5m.
	Deadline Duration `json:"deadline,omitempty"`
	// Settle is how long the goal must hold. Zero means 30s.
	Settle Duration `json:"settle,omitempty"`
	// RetryWithin bounds how long after a write the harness failed (an
	// injected 409, 429 or 5xx) the controller may take to show it will
	// retry it (check retries-failed-writes). Zero means 10s.
	RetryWithin Duration `json:"retryWithin,omitempty"`
}

// DefaultDeadline is Timing.Deadline when a scenario sets none.
const DefaultDeadline = 5 * time.Minute

// DefaultRetryWithin is Timing.RetryWithin when a scenario sets none.
const DefaultRetryWithin = 10 * time.Second

// Budgets fail a run that converged too expensively. Zero means no budget.
type Budgets struct {
	// WritesPerObject caps the controller's successful writes of any one
	// object (its Leases and Events aside).
	WritesPerObject int `json:"writesPerObject,omitempty"`
	// Reconciles caps the reconciles of all instances together, where the
	// controller can be probed.
	Reconciles int64 `json:"reconciles,omitempty"`
	// Requests caps the controller's requests by verb ("list": 10) or by
	// verb and resource ("update deployments": 3, "patch
	// deployments/status": 0).
	Requests map[string]int `json:"requests,omitempty"`
}

// FaultsEnd is when the last fault window closes, from the run's start.
func (s *Scenario) FaultsEnd() time.Duration {
	var end time.Duration
	for _, f := range s.Faults {
		w := f.When
		switch {
		case w.Until > 0:
			end = max(end, w.Until)
		case w.Every > 0 && w.Count > 0:
			end = max(end, w.After+w.Every*time.Duration(w.Count-1))
		default:
			end = max(end, w.After)
		}
	}
	return end
}

// Shortest is the least time a passing run of s can take: its goal must
// hold for the settle window, and not before the last fault window closes.
// A run in real time (envtest, a cluster) takes at least this long; one
// that fails takes up to its deadline.
func (s *Scenario) Shortest() time.Duration {
	d := s.withDefaults()
	return max(d.FaultsEnd(), time.Duration(d.Timing.Settle))
}

// realKinds are the names of the kinds that run in real time.
func realKinds() []string {
	return slices.DeleteFunc(backends.Names(), backends.Virtual)
}

// withDefaults returns s with its zero values filled.
func (s Scenario) withDefaults() Scenario {
	if len(s.Backends) == 0 {
		s.Backends = backends.Defaults()
	}
	s.World.Nodes = cmp.Or(s.World.Nodes, 3)
	s.Controller = s.Controller.withDefaults()
	s.Others = slices.Clone(s.Others)
	for i := range s.Others {
		s.Others[i] = s.Others[i].withDefaults()
	}
	s.Timing.Deadline = cmp.Or(s.Timing.Deadline, Duration(DefaultDeadline))
	s.Timing.Settle = cmp.Or(s.Timing.Settle, Duration(30*time.Second))
	s.Timing.RetryWithin = cmp.Or(s.Timing.RetryWithin, Duration(DefaultRetryWithin))
	s.World.Interference = slices.Clone(s.World.Interference)
	for i := range s.World.Interference {
		in := &s.World.Interference[i]
		in.Until = cmp.Or(in.Until, s.Timing.Deadline/2)
	}
	return s
}

// withDefaults returns c with its zero values filled.
func (c ControllerSpec) withDefaults() ControllerSpec {
	c.Instances = cmp.Or(c.Instances, 1)
	c.RestartAfter = cmp.Or(c.RestartAfter, Duration(5*time.Second))
	c.LeaseDuration = cmp.Or(c.LeaseDuration, Duration(15*time.Second))
	return c
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
	MaxNameLength = 57
	// MaxObjects bounds the objects a scenario creates, counts expanded.
	MaxObjects = 20_000
	MaxNodes   = 1000
	// MinInterval is the shortest period of a repeated action
	// (interference, readiness flaps, a repeated fault): well above the
	// clock's resolution, so virtual time moves.
	MinInterval = 10 * time.Millisecond
	// MaxDeadline bounds a run's simulated time.
	MaxDeadline     = 24 * time.Hour
	MaxInstances    = 10
	MaxFaults       = 100
	MaxCommand      = 100
	MaxSettings     = 32
	MaxInvariants   = 100
	MaxWriteRules   = 100
	MaxExpectations = 1000
	MaxInterference = 20
	// MaxOthers bounds the controllers run beside the one under test,
	// MaxRBAC the RBAC objects each declares.
	MaxOthers = 8
	MaxRBAC   = 100
)

// CheckName says whether name can name a scenario: it names subtests,
// result files and namespaces.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("required")
	case len(name) > MaxNameLength:
		return fmt.Errorf("at most %d characters, got %d", MaxNameLength, len(name))
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Errorf("%q: use lower-case letters, digits and dashes, starting and ending with a letter or digit", name)
	}
	return nil
}

// Validate checks every field and returns all that is wrong; expressions
// are compiled, so one that does not compile is named with its position.
func (s Scenario) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fieldError{path, fmt.Sprintf(format, args...)})
	}
	if err := CheckName(s.Name); err != nil {
		bad("name", "%s", err)
	}
	if s.Catches == "" {
		bad("catches", "say which broken behaviour this scenario catches")
	}
	for i, b := range s.Backends {
		if _, err := backends.Named(b); err != nil {
			bad(fmt.Sprintf("backends[%d]", i), "%s", err)
		}
	}
	def := s.withDefaults()
	total := 0
	for i, o := range s.Objects {
		path := fmt.Sprintf("objects[%d]", i)
		if (o.File == "") == (o.Manifest == nil) {
			bad(path, "give a file or a manifest, not both or neither")
		}
		if o.Count < 0 || o.Count > MaxObjects {
			bad(path+".count", "must be within 0..%d, got %d", MaxObjects, o.Count)
			continue
		}
		total += max(o.Count, 1)
		if o.Manifest != nil && o.Source == "" { // a file's were checked as it was read
			for _, msg := range checkManifest(o.Manifest, o.Count) {
				bad(path+".manifest", "%s", msg)
			}
		}
	}
	if total > MaxObjects {
		bad("objects", "%d objects, at most %d", total, MaxObjects)
	}
	validateWorld(s.World, def, bad)
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
	validateControllers(s, bad)
	validateExpectations(s, bad, func(e valueError) { errs = append(errs, e) })
	if s.Timing.Deadline < 0 || s.Timing.Settle < 0 || s.Timing.RetryWithin < 0 {
		bad("timing", "durations must not be negative")
	}
	if s.Timing.Deadline > Duration(MaxDeadline) {
		bad("timing.deadline", "at most %v, got %v", MaxDeadline, time.Duration(s.Timing.Deadline))
	}
	if s.Timing.RetryWithin > Duration(MaxDeadline) {
		bad("timing.retryWithin", "at most %v, got %v", MaxDeadline, time.Duration(s.Timing.RetryWithin))
	}
	if d, st := def.Timing.Deadline, def.Timing.Settle; st >= d {
		bad("timing.settle", "the settle window (%v) must be shorter than the deadline (%v)", time.Duration(st), time.Duration(d))
	}
	b := s.Budgets
	if b.WritesPerObject < 0 || b.Reconciles < 0 {
		bad("budgets", "must not be negative")
	}
	for _, key := range sortedKeys(b.Requests) {
		if n := b.Requests[key]; n < 0 {
			bad("budgets.requests."+key, "must not be negative, got %d", n)
		}
		verb, resource, _ := strings.Cut(key, " ")
		if !slices.Contains(chaos.Verbs, verb) {
			bad("budgets.requests."+key, "unknown verb %q (known: %s)", verb, strings.Join(chaos.Verbs, ", "))
		}
		if strings.Contains(resource, " ") || len(resource) > 127 {
			bad("budgets.requests."+key, "a verb, or a verb and a resource (\"update deployments\")")
		}
	}
	return errors.Join(errs...)
}

func validateWorld(w World, def Scenario, bad func(path, format string, args ...any)) {
	if w.Nodes < 0 || w.Nodes > MaxNodes {
		bad("world.nodes", "must be within 0..%d, got %d", MaxNodes, w.Nodes)
	}
	if r := w.Readiness; r != (Readiness{}) {
		if err := r.Model().Validate(); err != nil {
			bad("world.readiness", "%v", err)
		}
		if r.Period != 0 && time.Duration(r.Period) < MinInterval {
			bad("world.readiness.period", "at least %v, got %v", MinInterval, time.Duration(r.Period))
		}
		if r.Delay > Duration(MaxDeadline) || r.Jitter > Duration(MaxDeadline) || r.Period > Duration(MaxDeadline) {
			bad("world.readiness", "delay, jitter and period must be at most %v", MaxDeadline)
		}
		if r.PerNode > 1000 {
			bad("world.readiness.perNode", "at most 1000, got %d", r.PerNode)
		}
		if f := r.Fraction; math.IsNaN(f) || math.IsInf(f, 0) {
			bad("world.readiness.fraction", "must be a finite number")
		}
	}
	if len(w.Interference) > MaxInterference {
		bad("world.interference", "at most %d, got %d", MaxInterference, len(w.Interference))
		return
	}
	schemas := def.kindSchemas()
	for i, in := range w.Interference {
		path := fmt.Sprintf("world.interference[%d]", i)
		if time.Duration(in.Every) < MinInterval {
			bad(path+".every", "at least %v, got %v", MinInterval, time.Duration(in.Every))
		}
		if in.Until < 0 || in.Until > Duration(MaxDeadline) {
			bad(path+".until", "within 0..%v", MaxDeadline)
		}
		if in.After < 0 || in.After > Duration(MaxDeadline) {
			bad(path+".after", "within 0..%v", MaxDeadline)
		}
		if in.Count < 0 {
			bad(path+".count", "must not be negative, got %d", in.Count)
		}
		if in.Create == nil || in.Select != (Selector{}) {
			for _, msg := range in.Select.problems() {
				bad(path+".select", "%s", msg)
			}
		}
		switch {
		case countTrue(in.Set != nil, in.Patch != nil, in.Delete, in.Create != nil) != 1:
			bad(path, "say what the actor does: set, patch, delete or create, one of them")
		case in.Refused && in.Set == nil && in.Patch == nil:
			bad(path+".refused", "only a set or a patch can be refused")
		case in.Create != nil:
			m := Object(withN(map[string]any(in.Create), 0).(map[string]any))
			for _, msg := range checkManifest(m, 1) {
				bad(path+".create", "%s", msg)
			}
			if u := (unstructured.Unstructured{Object: in.Create}); u.GetGenerateName() != "" || strings.Contains(u.GetName(), "{{index}}") {
				bad(path+".create", "metadata.name: a name, with {{n}} where each action makes another")
			}
		case in.Patch != nil:
			for _, msg := range checkPatch(*in.Patch) {
				bad(path+".patch", "%s", msg)
			}
		case in.Set != nil:
			if p, err := expect.ParsePath(in.Set.Path); err != nil {
				bad(path+".set.path", "%v", err)
			} else {
				// The API server drops a field its kind cannot hold: the
				// actor would do nothing, silently.
				if errs := schemas.of(in.Select).CheckValue(p, withNow(in.Set.Value, time.Time{})); len(errs) > 0 {
					bad(path+".set", "%s", errs[0])
				}
			}
			for _, msg := range checkNow(in.Set.Value, "") {
				bad(path+".set.value", "%s", strings.TrimPrefix(msg, ": "))
			}
			switch b, _ := json.Marshal(in.Set.Value); {
			case in.Set.Remove && in.Set.Value != nil:
				bad(path+".set", "give a value, or remove: true, not both")
			case !in.Set.Remove && in.Set.Value == nil:
				bad(path+".set", "give a value, or remove: true")
			case len(b) > 1024:
				bad(path+".set.value", "at most 1024 bytes as JSON, got %d", len(b))
			}
		}
	}
}

// validateControllers checks the controller under test's spec and the
// others', and the controllers the faults name.
func validateControllers(s Scenario, bad func(path, format string, args ...any)) {
	validateController("controller", s.Controller, s, bad)
	if s.Controller.Name != "" {
		bad("controller.name", "the controller under test is named by its Go value (Options.Controller); only others are named")
	}
	if len(s.Others) > MaxOthers {
		bad("others", "at most %d, got %d", MaxOthers, len(s.Others))
		return
	}
	seen := map[string]bool{}
	for i, c := range s.Others {
		path := fmt.Sprintf("others[%d]", i)
		validateController(path, c, s, bad)
		switch err := CheckControllerName(c.Name); {
		case err != nil:
			bad(path+".name", "%v", err)
		case seen[c.Name]:
			bad(path+".name", "%q is given twice", c.Name)
		}
		seen[c.Name] = true
	}
	for i, f := range s.Faults {
		if i >= MaxFaults || f.Controller == "" {
			continue
		}
		path := fmt.Sprintf("faults[%d].controller", i)
		if !seen[f.Controller] {
			bad(path, "%q: no such controller among the others (%s)", f.Controller, strings.Join(otherNames(s), ", "))
			continue
		}
		if in, err := f.Build(); err == nil {
			if _, cp := chaos.PlaneOf(in.Fault); cp && in.Fault.Target().IsZero() {
				bad(path, "%s acts on the control plane at its time, not on one controller's requests: give it no controller", f.Fault)
			}
		}
	}
}

// otherNames are the names of s's others, or "none" when it has none.
func otherNames(s Scenario) []string {
	var out []string
	for _, c := range s.Others {
		out = append(out, strconv.Quote(c.Name))
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// CheckControllerName says whether name can name one of a scenario's
// others: it names Leases, instances and the history's marks.
func CheckControllerName(name string) error {
	switch {
	case name == "":
		return errors.New("required: the name faults and Options.Others know it by")
	case len(name) > MaxNameLength:
		return fmt.Errorf("at most %d characters, got %d", MaxNameLength, len(name))
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Errorf("%q: use lower-case letters, digits and dashes, starting and ending with a letter or digit", name)
	}
	return nil
}

func validateController(path string, c ControllerSpec, s Scenario, bad func(path, format string, args ...any)) {
	if c.Instances < 0 || c.Instances > MaxInstances {
		bad(path+".instances", "must be within 0..%d, got %d", MaxInstances, c.Instances)
	}
	if len(c.Command) > MaxCommand {
		bad(path+".command", "at most %d arguments, got %d", MaxCommand, len(c.Command))
	}
	if virtual := slices.DeleteFunc(slices.Clone(s.Backends), func(b string) bool { return !backends.Virtual(b) }); len(c.Command) > 0 && len(virtual) > 0 {
		bad(path+".command", "a controller binary runs in real time and needs a server to reach: list backends without %s", strings.Join(virtual, ", "))
	}
	if len(c.Command) > 0 && len(s.Backends) == 0 {
		bad(path+".command", "a controller binary runs in real time and needs a server to reach: set backends (%s)", strings.Join(realKinds(), ", "))
	}
	if c.RestartAfter < 0 || c.LeaseDuration < 0 || c.StartAfter < 0 {
		bad(path, "durations must not be negative")
	}
	if c.RestartAfter > Duration(MaxDeadline) || c.LeaseDuration > Duration(MaxDeadline) || c.StartAfter > Duration(MaxDeadline) {
		bad(path, "durations must be at most %v", MaxDeadline)
	}
	if c.LeaseDuration != 0 && c.LeaseDuration < Duration(time.Second) {
		bad(path+".leaseDuration", "at least 1s, got %v", time.Duration(c.LeaseDuration))
	}
	if len(c.Settings) > MaxSettings {
		bad(path+".settings", "at most %d, got %d", MaxSettings, len(c.Settings))
	}
	for _, k := range sortedKeys(c.Settings) {
		if len(k) > 63 || len(c.Settings[k]) > 1024 {
			bad(path+".settings."+k, "a key of at most 63 characters and a value of at most 1024")
		}
	}
	if len(c.RBAC) > MaxRBAC {
		bad(path+".rbac", "at most %d objects, got %d", MaxRBAC, len(c.RBAC))
		return
	}
	for i, o := range c.RBAC {
		at := fmt.Sprintf("%s.rbac[%d]", path, i)
		switch {
		case (o.File == "") == (o.Manifest == nil):
			bad(at, "give a file or a manifest, not both or neither")
		case o.File != "":
			bad(at+".file", "%s: a file is read as the scenario file is loaded (Load, Parse); a scenario built in Go gives manifests", o.File)
		case o.Count != 0:
			bad(at+".count", "RBAC objects are created once: no count")
		case o.Manifest != nil:
			if _, err := rbacObjects([]Objects{o}); err != nil {
				bad(at, "%v", err)
			}
		}
	}
	if len(c.RBAC) > 0 && c.ServiceAccount == "" {
		bad(path+".serviceAccount", "RBAC is given for a service account: name it")
	}
	if c.ServiceAccount != "" {
		if msgs := validation.IsDNS1123Subdomain(c.ServiceAccount); len(msgs) > 0 {
			bad(path+".serviceAccount", "%q: %s", c.ServiceAccount, strings.Join(msgs, "; "))
		}
	}
}

// identity is who c runs as, as its serviceAccount and rbac say; zero when
// they say nothing.
func (c ControllerSpec) identity() (sim.Identity, error) {
	if c.ServiceAccount == "" && len(c.RBAC) == 0 {
		return sim.Identity{}, nil
	}
	objs, err := rbacObjects(c.RBAC)
	if err != nil {
		return sim.Identity{}, err
	}
	return sim.Identity{ServiceAccount: c.ServiceAccount, RBAC: objs}, nil
}

// rbacKinds are the kinds an identity's RBAC may hold.
var rbacKinds = []string{"v1 ServiceAccount", "rbac.authorization.k8s.io/v1 Role", "rbac.authorization.k8s.io/v1 ClusterRole",
	"rbac.authorization.k8s.io/v1 RoleBinding", "rbac.authorization.k8s.io/v1 ClusterRoleBinding"}

// rbacObjects decodes RBAC manifests (their files read already), strictly.
func rbacObjects(list []Objects) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range list {
		if o.Manifest == nil {
			return nil, fmt.Errorf("%s: not read (see Validate)", o.File)
		}
		api, _ := o.Manifest["apiVersion"].(string)
		kind, _ := o.Manifest["kind"].(string)
		if !slices.Contains(rbacKinds, api+" "+kind) {
			return nil, fmt.Errorf("%s %s is not RBAC: a ServiceAccount, Role, ClusterRole, RoleBinding or ClusterRoleBinding", api, kind)
		}
		data, err := json.Marshal(map[string]any(o.Manifest))
		if err != nil {
			return nil, err
		}
		objs, err := sim.DecodeRBAC(cmp.Or(o.Source, "manifest"), data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func validateExpectations(s Scenario, bad func(path, format string, args ...any), badAt func(valueError)) {
	schemas := s.kindSchemas()
	if len(s.Invariants) > MaxInvariants {
		bad("invariants", "at most %d, got %d", MaxInvariants, len(s.Invariants))
	} else {
		seen := map[string]bool{}
		for i, inv := range s.Invariants {
			path := fmt.Sprintf("invariants[%d]", i)
			switch {
			case len(validation.IsDNS1123Label(inv.Name)) > 0:
				bad(path+".name", "%q: lower-case words joined by dashes, at most 63 characters", inv.Name)
			case slices.Contains(BuiltinInvariants, inv.Name):
				bad(path+".name", "%q is a built-in invariant", inv.Name)
			case seen[inv.Name]:
				bad(path+".name", "%q is given twice", inv.Name)
			}
			seen[inv.Name] = true
			for _, msg := range inv.Select.problems() {
				bad(path+".select", "%s", msg)
			}
			if expr, err := check.CompileRule(inv.Rule); err != nil {
				bad(path+".rule", "%v", err)
			} else {
				schemas.checkFields(expr, inv.Select, path+".rule", fmt.Sprintf("invariant %q: rule", inv.Name), badAt)
			}
			for _, kind := range check.KindsAcross(inv.Rule) {
				if !slices.ContainsFunc(s.kinds(), func(gvk schema.GroupVersionKind) bool { return gvk.Kind == kind }) {
					bad(path+".rule", "objects.%s: the scenario names no kind %s (in its objects or selectors), so none is watched", kind, kind)
				}
			}
		}
	}
	if len(s.Writes) > MaxWriteRules {
		bad("writes", "at most %d, got %d", MaxWriteRules, len(s.Writes))
	} else {
		for i, w := range s.Writes {
			path := fmt.Sprintf("writes[%d]", i)
			for _, msg := range w.Select.problems() {
				bad(path+".select", "%s", msg)
			}
			for j, v := range w.Verbs {
				if !slices.Contains(writeVerbs, v) {
					bad(fmt.Sprintf("%s.verbs[%d]", path, j), "unknown verb %q (%s)", v, strings.Join(writeVerbs, ", "))
				}
			}
			for j, f := range w.Fields {
				at, err := checkField(f)
				if err != nil {
					bad(fmt.Sprintf("%s.fields[%d]", path, j), "%v", err)
					continue
				}
				// A field its kind cannot hold allows nothing: a typo makes
				// the rule refuse every write it was meant for.
				if errs := schemas.of(w.Select).CheckValue(at, nil); len(errs) > 0 {
					bad(fmt.Sprintf("%s.fields[%d]", path, j), "%s", errs[0])
				}
			}
		}
	}
	n := len(s.Inputs.Pin) + len(s.Inputs.Exclude)
	for _, vs := range s.Inputs.Values {
		n += 1 + len(vs)
	}
	if n > MaxInputRules {
		bad("inputs", "at most %d paths and values, got %d", MaxInputRules, n)
	}
	for _, l := range []struct {
		what  string
		paths []string
	}{{"pin", s.Inputs.Pin}, {"exclude", s.Inputs.Exclude}} {
		for i, p := range l.paths {
			if p == "" {
				bad(fmt.Sprintf("inputs.%s[%d]", l.what, i), "an empty path")
			}
		}
	}
	if _, ok := s.Inputs.Values[""]; ok {
		bad("inputs.values", "an empty path")
	}
	if len(s.Goal.Objects) > MaxExpectations {
		bad("goal.objects", "at most %d, got %d", MaxExpectations, len(s.Goal.Objects))
		return
	}
	for i, e := range s.Goal.Objects {
		path := fmt.Sprintf("goal.objects[%d]", i)
		for _, msg := range e.Select.problems() {
			bad(path+".select", "%s", msg)
		}
		if e.Match == nil && e.Condition == "" && e.Count == nil {
			bad(path, "say what must hold: match, condition or count")
		}
		if errs := schemas.of(e.Select).CheckValue(nil, map[string]any(e.Match)); len(errs) > 0 {
			bad(path+".match."+errs[0].Path, "%s", errs[0]) // the first: a page of errors at most
		}
		if e.Condition != "" {
			if expr, err := check.CompileCondition(e.Condition); err != nil {
				bad(path+".condition", "%v", err)
			} else {
				schemas.checkFields(expr, e.Select, path+".condition", path+": condition", badAt)
			}
			for _, kind := range check.KindsAcross(e.Condition) {
				if !slices.ContainsFunc(s.kinds(), func(gvk schema.GroupVersionKind) bool { return gvk.Kind == kind }) {
					bad(path+".condition", "objects.%s: the scenario names no kind %s (in its objects or selectors), so none is watched", kind, kind)
				}
			}
		}
		if e.Count != nil && (*e.Count < 0 || *e.Count > MaxObjects) {
			bad(path+".count", "must be within 0..%d", MaxObjects)
		}
	}
	for i, a := range s.Allow {
		if !slices.Contains(BuiltinInvariants, a) {
			bad(fmt.Sprintf("allow[%d]", i), "%q is not a built-in invariant (%s)", a, strings.Join(BuiltinInvariants, ", "))
		}
	}
}

// checkField parses a write rule's field and returns the path every field
// it allows lies under: the whole path, or its parent when it ends in a
// wildcard prefix (spec.repl*, annotations["converge.dev/*"]); nil for "*"
// (status.* is status).
func checkField(f string) (expect.Path, error) {
	prefix := false
	switch {
	case f == "*":
		return nil, nil
	case strings.HasSuffix(f, `*"]`):
		f, prefix = strings.TrimSuffix(f, `*"]`)+`"]`, true
	case strings.HasSuffix(f, ".*"):
		f = strings.TrimSuffix(f, ".*")
	case strings.HasSuffix(f, "*"):
		f, prefix = strings.TrimSuffix(f, "*"), true
	}
	p, err := expect.ParsePath(f)
	if err != nil || !prefix || len(p) == 0 {
		return p, err
	}
	return p[:len(p)-1], nil
}

// writeVerbs are the verbs a write rule may name.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// problems lists what is wrong with a selector.
func (sel Selector) problems() []string {
	var out []string
	if sel.APIVersion == "" || sel.Kind == "" {
		out = append(out, "apiVersion and kind are required")
	} else if _, err := schema.ParseGroupVersion(sel.APIVersion); err != nil || len(sel.APIVersion) > 253 || len(sel.Kind) > 63 {
		out = append(out, fmt.Sprintf("apiVersion %q, kind %q: not a group/version and a kind", sel.APIVersion, sel.Kind))
	}
	if sel.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(sel.Name); len(msgs) > 0 {
			out = append(out, fmt.Sprintf("name %q: %s", sel.Name, strings.Join(msgs, "; ")))
		}
	}
	if _, err := labels.Parse(sel.Labels); err != nil {
		out = append(out, fmt.Sprintf("labels: %v", err))
	}
	return out
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

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// jsonPatchOps are the operations of RFC 6902.
var jsonPatchOps = []string{"add", "remove", "replace", "move", "copy", "test"}

// subresourceName is what a subresource's name can be.
var subresourceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// checkPatch lists what is wrong with p.
func checkPatch(p PatchStep) []string {
	var out []string
	if p.Subresource != "" && !subresourceName.MatchString(p.Subresource) {
		out = append(out, fmt.Sprintf("subresource %q: lower-case letters, digits and dashes, such as status", p.Subresource))
	}
	switch p.Type {
	case "", MergePatch:
		if _, ok := p.Patch.(map[string]any); !ok {
			out = append(out, "a merge patch is an object, such as {spec: {replicas: 5}}")
		}
	case JSONPatch:
		ops, ok := p.Patch.([]any)
		if !ok || len(ops) == 0 {
			out = append(out, "a json patch is a list of operations, such as [{op: replace, path: /spec/replicas, value: 5}]")
			break
		}
		for i, o := range ops {
			op, _ := o.(map[string]any)
			name, _ := op["op"].(string)
			at, _ := op["path"].(string)
			switch {
			case !slices.Contains(jsonPatchOps, name):
				out = append(out, fmt.Sprintf("patch[%d].op: one of %s", i, strings.Join(jsonPatchOps, ", ")))
			case !strings.HasPrefix(at, "/"):
				out = append(out, fmt.Sprintf("patch[%d].path: a JSON pointer, such as /spec/replicas", i))
			}
		}
	default:
		out = append(out, fmt.Sprintf("type %q: merge or json", p.Type))
	}
	if b, _ := json.Marshal(p.Patch); len(b) > 1024 {
		out = append(out, fmt.Sprintf("at most 1024 bytes as JSON, got %d", len(b)))
	}
	return append(out, checkNow(p.Patch, "")...)
}
