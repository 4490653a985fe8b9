// Package invocation is what one test binary of scenarios is asked to do,
// as one typed value: the converge CLI writes it (Args), scenariotest reads
// it back (Read), and both name each setting in one place.
//
// A test binary reads it from its -converge.* flags, where its TestMain
// registers them (scenariotest.Main), and from $CONVERGE_FLAGS, which holds
// the same flags (quoted as a POSIX shell would) and works in any test
// binary; the flags win.
package invocation

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/shlex"

	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/sim/backends"
)

// Env is the environment variable that carries an invocation's flags.
const Env = "CONVERGE_FLAGS"

// Prefix starts every flag's name.
const Prefix = "converge."

// Invocation is one test binary's run of scenarios.
type Invocation struct {
	// Seeds per scenario and backend, from Seed.
	Seeds int
	// Seed is the first seed.
	Seed uint64
	// Backends to run on.
	Backends []string
	// Full runs the whole matrix (scenariotest.Options.Full).
	Full bool
	// Report is the folder for every result and the HTML report.
	Report string
	// RunTimeout is the wall-clock limit of one run.
	RunTimeout time.Duration
	// RunID is recorded in every result: the invocation that asked.
	RunID string
	// Kubeconfig of the cluster backend.
	Kubeconfig string
	// Kwok is a running kwokctl cluster's folder, or "start".
	Kwok string
	// List prints the scenarios and runs nothing.
	List bool
	// Files run instead of the test's own scenarios.
	Files []string
	// Explore names a fault-free scenario to explore instead.
	Explore string
	// ExplorePlan is where an exploration's plan is written or read.
	ExplorePlan string
	// ExploreWithoutFaults explores a scenario with faults without them.
	ExploreWithoutFaults bool
	// ExploreInputs explores the scenario's inputs instead of its faults.
	ExploreInputs bool
	// ExploreShard is "i/n": run shard i of n of the plan's points; or
	// ShardFromStdin.
	ExploreShard string
	// ExploreClaims, with ExploreShard, is a folder, new to the
	// exploration, through which the n processes share the points
	// instead: each runs the next point no process has claimed yet (a
	// file per point, created exclusively).
	ExploreClaims string
	// Shrink names a failing run's result file to shrink instead.
	Shrink string
	// ReplayPackage and ReplayBinary say how the replay command a run
	// records names these tests, from where the user asked for the run
	// (converge's folder): go test of that package, or that compiled test
	// binary run directly. Neither: go test of the test's own package,
	// from its module's root.
	ReplayPackage, ReplayBinary string
}

// ShardFromStdin as ExploreShard reads the shard from a line of standard
// input ("i/n") once the test is ready to run it, and runs nothing when the
// input ends first: a process started before the plan is written, which
// waits for it.
const ShardFromStdin = "stdin"

// Default is the invocation of a plain go test.
func Default() Invocation {
	return Invocation{Seeds: 1, Seed: 1, Backends: backends.Defaults(), RunTimeout: 15 * time.Minute}
}

// field is one setting: its flag's name and usage, and how it binds to an
// Invocation.
type field struct {
	name, usage string
	bind        func(*Invocation) flag.Value
}

// pinned are the settings Args always writes, so that what it gives
// replaces what $CONVERGE_FLAGS may hold: which runs there are.
var pinned = []string{"seeds", "seed", "backends"}

// fields are the settings, in the order Args writes them.
func fields() []field {
	return []field{
		{"seeds", "seeds per scenario and backend", func(i *Invocation) flag.Value { return (*intValue)(&i.Seeds) }},
		{"seed", "the first seed", func(i *Invocation) flag.Value { return (*uintValue)(&i.Seed) }},
		{"backends", "backends to run on, of " + strings.Join(backends.Names(), ", ") + " (comma-separated)", func(i *Invocation) flag.Value { return (*listValue)(&i.Backends) }},
		{"full", "the whole matrix: every scenario and fault profile on every backend it names (Options.EnvtestScenarios and FaultScenarios ignored)", func(i *Invocation) flag.Value { return (*boolValue)(&i.Full) }},
		{"report", "write every result and the HTML report into this folder (failing runs are always written)", func(i *Invocation) flag.Value { return (*stringValue)(&i.Report) }},
		{"run-timeout", "wall-clock limit of one run", func(i *Invocation) flag.Value { return (*durationValue)(&i.RunTimeout) }},
		{"run-id", "recorded in every result: the invocation that asked for the run", func(i *Invocation) flag.Value { return (*stringValue)(&i.RunID) }},
		{"kubeconfig", "kubeconfig of the cluster backend (its runs are skipped without one)", func(i *Invocation) flag.Value { return (*stringValue)(&i.Kubeconfig) }},
		{"kwok", `folder of a running kwokctl cluster (converge kwok, sim/kwok) for the cluster backend, or "start" to start one for the test`, func(i *Invocation) flag.Value { return (*stringValue)(&i.Kwok) }},
		{"list", "print the scenarios (one JSON line each) and run nothing", func(i *Invocation) flag.Value { return (*boolValue)(&i.List) }},
		{"file", "run this scenario file instead of the test's own scenarios (repeat for more)", func(i *Invocation) flag.Value { return (*filesValue)(&i.Files) }},
		{"explore", "explore this fault-free scenario instead of running the list", func(i *Invocation) flag.Value { return (*stringValue)(&i.Explore) }},
		{"explore-plan", "with -converge.explore: learn the references and write the plan here, run no point; with -converge.explore-shard, run points of this plan", func(i *Invocation) flag.Value { return (*stringValue)(&i.ExplorePlan) }},
		{"explore-without-faults", "explore the world of a scenario that has faults, without them", func(i *Invocation) flag.Value { return (*boolValue)(&i.ExploreWithoutFaults) }},
		{"explore-inputs", "explore the changes of the scenario's custom resources its CRDs allow, instead of faults", func(i *Invocation) flag.Value { return (*boolValue)(&i.ExploreInputs) }},
		{"explore-shard", "i/n: run shard i (0-based) of n of the plan's points, writing outcomes-i.json into -converge.report; \"stdin\": read i/n from a line of standard input first (none: run nothing)", func(i *Invocation) flag.Value { return (*stringValue)(&i.ExploreShard) }},
		{"explore-claims", "with -converge.explore-shard i/n: the n processes share the plan's points through this folder (new to each exploration), each running the next one no process has claimed yet, instead of every n-th", func(i *Invocation) flag.Value { return (*stringValue)(&i.ExploreClaims) }},
		{"shrink", "shrink the failing run of this result file instead of running the list", func(i *Invocation) flag.Value { return (*stringValue)(&i.Shrink) }},
		{"replay-package", "the package replay commands give go test, as named from where the run was asked for", func(i *Invocation) flag.Value { return (*stringValue)(&i.ReplayPackage) }},
		{"replay-binary", "the compiled test binary replay commands run, as named from where the run was asked for", func(i *Invocation) flag.Value { return (*stringValue)(&i.ReplayBinary) }},
	}
}

// Register adds the -converge.* flags to fs, each defaulting to Default's
// value. Read takes them from there.
func Register(fs *flag.FlagSet) {
	d := Default()
	for _, f := range fields() {
		fs.Var(f.bind(&d), Prefix+f.name, f.usage)
	}
}

// Args are the flags that give i to a test binary: the seeds and backends,
// and each other setting that differs from Default, in a fixed order.
func (i Invocation) Args() []string {
	d := Default()
	var out []string
	for _, f := range fields() {
		v, dv := f.bind(&i), f.bind(&d)
		if files, ok := v.(*filesValue); ok {
			for _, p := range *files {
				out = append(out, "-"+Prefix+f.name+"="+p)
			}
			continue
		}
		if v.String() != dv.String() || slices.Contains(pinned, f.name) {
			out = append(out, "-"+Prefix+f.name+"="+v.String())
		}
	}
	return out
}

// EnvValue is Args as $CONVERGE_FLAGS holds them.
func (i Invocation) EnvValue() string {
	args := i.Args()
	for k, a := range args {
		args[k] = text.ShellQuote(a)
	}
	return strings.Join(args, " ")
}

// Parse reads an invocation from -converge.* flags over Default; any other
// argument is an error.
func Parse(args []string) (Invocation, error) {
	i := Default()
	fs := flag.NewFlagSet("converge", flag.ContinueOnError)
	fs.SetOutput(discard{})
	for _, f := range fields() {
		fs.Var(f.bind(&i), Prefix+f.name, f.usage)
	}
	if err := fs.Parse(args); err != nil {
		return Invocation{}, err
	}
	if fs.NArg() > 0 {
		return Invocation{}, fmt.Errorf("not a -%s flag: %q", Prefix+"*", fs.Arg(0))
	}
	return i, i.Validate()
}

// Read is the invocation of this test binary: $CONVERGE_FLAGS, then the
// -converge.* flags of fs that were set on its command line (where Register
// added them; nil means none).
func Read(fs *flag.FlagSet) (Invocation, error) {
	env, err := shlex.Split(os.Getenv(Env))
	if err != nil {
		return Invocation{}, fmt.Errorf("$%s: %w", Env, err)
	}
	args := env
	if fs != nil {
		fs.Visit(func(f *flag.Flag) {
			if name, ok := strings.CutPrefix(f.Name, Prefix); ok {
				if fv, ok := f.Value.(*filesValue); ok {
					for _, p := range *fv {
						args = append(args, "-"+Prefix+name+"="+p)
					}
					return
				}
				args = append(args, "-"+f.Name+"="+f.Value.String())
			}
		})
	}
	i, err := Parse(args)
	if err != nil && len(env) > 0 {
		return Invocation{}, fmt.Errorf("$%s or the -%s* flags: %w", Env, Prefix, err)
	}
	return i, err
}

// Validate says what is wrong with i, or nil.
func (i Invocation) Validate() error {
	var errs []error
	if i.Seeds < 1 || i.Seed > math.MaxUint64-uint64(i.Seeds-1) {
		errs = append(errs, fmt.Errorf("-converge.seed=%d -converge.seeds=%d: the seeds must fit in 0..%d", i.Seed, i.Seeds, uint64(math.MaxUint64)))
	}
	for _, b := range i.Backends {
		if _, err := backends.Named(b); err != nil {
			errs = append(errs, fmt.Errorf("-converge.backends: %w", err))
		}
	}
	if i.RunTimeout <= 0 {
		errs = append(errs, fmt.Errorf("-converge.run-timeout=%v: must be positive", i.RunTimeout))
	}
	return errors.Join(errs...)
}

// Command is the shell command that runs go test with args, giving it i:
// as flags where the test binary registers them, else in $CONVERGE_FLAGS.
func (i Invocation) Command(flags bool, goTest string) string {
	if flags {
		for _, a := range i.Args() {
			goTest += " " + text.ShellQuote(a)
		}
		return goTest
	}
	if v := i.EnvValue(); v != "" {
		return Env + "=" + text.ShellQuote(v) + " " + goTest
	}
	return goTest
}

// Registered says whether fs has the -converge.* flags.
func Registered(fs *flag.FlagSet) bool {
	return fs != nil && fs.Lookup(Prefix+"seeds") != nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

type (
	intValue      int
	uintValue     uint64
	boolValue     bool
	stringValue   string
	durationValue time.Duration
	listValue     []string
	filesValue    []string
)

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	*v = intValue(n)
	return err
}
func (v *uintValue) String() string { return strconv.FormatUint(uint64(*v), 10) }
func (v *uintValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	*v = uintValue(n)
	return err
}
func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	*v = boolValue(b)
	return err
}
func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *durationValue) String() string   { return time.Duration(*v).String() }
func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	*v = durationValue(d)
	return err
}
func (v *listValue) String() string { return strings.Join(*v, ",") }
func (v *listValue) Set(s string) error {
	*v = nil
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			*v = append(*v, b)
		}
	}
	return nil
}

// filesValue is repeated: each path is taken whole, commas and all.
func (v *filesValue) String() string     { return strings.Join(*v, " ") }
func (v *filesValue) Set(s string) error { *v = append(*v, s); return nil }
