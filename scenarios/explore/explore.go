package explore

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

// PlanSchema versions the plan file an exploration writes between its
// steps.
const PlanSchema = "converge.dev/explore-plan/v1"

// DefaultReferences is how many fault-free runs learn the reference.
const DefaultReferences = 4

// restartAfter is how soon a crashed or terminated instance is replaced,
// when the scenario does not say.
const restartAfter = 5 * time.Second

// Plan is an exploration before its points run: the scenario, the
// reference runs it learned from, the masks, and the points.
type Plan struct {
	Schema   string              `json:"schema"`
	Scenario *scenarios.Scenario `json:"scenario"`
	Backend  string              `json:"backend"`
	// Seed is the seed every point runs with; the references ran with
	// Seed, Seed+1, ...
	Seed       uint64            `json:"seed"`
	References []*reports.Result `json:"references"`
	// Masks are the static masks and, added to them, every field that
	// differed between the references (Learned, Noise.Fields).
	Masks   Masks `json:"masks"`
	Learned Masks `json:"learned"`
	// Noise is what the references disagree on: none of it is judged.
	Noise Noise `json:"noise"`
	// Counts are the ADDED and DELETED events per object the references
	// saw, for the objects every reference saw as often: one count each.
	Counts map[string][]EventCount `json:"counts"`
	// Seen are the objects (resource/name) every reference saw.
	Seen map[string]bool `json:"seen"`
	// Volatile are the objects (resource/name) another actor than the
	// controller deleted in a reference: whether they exist at the end, and
	// how often they were added, is that actor's timing.
	Volatile map[string]bool `json:"volatile"`
	// Found counts the points per class before pruning; Steps are the
	// pruning passes.
	Found  map[string]int `json:"found"`
	Steps  []Step         `json:"steps"`
	Points []Point        `json:"points"`
	// Inputs are the input points, when asked for (PlanInputs).
	Inputs []InputPoint `json:"inputs,omitempty"`

	// Derived from the references on the first judgement (learn).
	learnOnce     sync.Once
	refEnd        map[string]flatObject
	seenInSome    map[string]bool
	volatileNames map[string]bool
	resourceOf    map[string]string // kind -> resource
	noisyExists   map[string]bool   // flatEnd keys
	noisyFamily   map[string]bool
	baseline      baseline
}

// EventCount is how many times the observer saw an object added and
// deleted in one run.
type EventCount struct {
	Added   int `json:"added"`
	Deleted int `json:"deleted"`
}

// Check says whether s can be explored: it must have no faults of its own
// (the exploration adds one per point).
func Check(s *scenarios.Scenario) error {
	if len(s.Faults) > 0 {
		return fmt.Errorf("scenario %s has faults of its own: exploration starts from a fault-free scenario (its objects, world and goal) and adds one fault per run; explore its world without them (converge explore --without-faults)", s.Name)
	}
	return s.Validate()
}

// WithoutFaults is s with its faults taken out: its world (objects,
// readiness, other actors), controller and goal, for an exploration.
func WithoutFaults(s *scenarios.Scenario) *scenarios.Scenario {
	out := *s
	out.Faults = nil
	out.Description = "the world of " + s.Name + " without its faults: " + s.Description
	return &out
}

// RefRun is one reference run: the scenario fault-free (its controller
// perhaps starting late) and a seed.
type RefRun struct {
	Scenario *scenarios.Scenario
	Seed     uint64
}

// lateStarts are how much later than the scenario says the references
// after the first two start the controller. A fault makes a controller act
// later than it would have (a restart, an event held back): a correct
// controller that acts later may decide otherwise (the scaler scales up
// only while fewer than half the pods are ready), and a reference that
// started late shows which fields such a decision moves, so they are
// masked rather than reported.
var lateStarts = []time.Duration{restartAfter, 3 * restartAfter}

// References are the n reference runs of s (n >= 2): the first two as
// written, with seeds seed and seed+1; the others with the controller
// starting late (see lateStarts), seeds following. MoreReferences says
// whether they call for more.
func References(s *scenarios.Scenario, seed uint64, n int) []RefRun {
	out := make([]RefRun, n)
	for i := range out {
		out[i] = referenceRun(s, seed, i, n)
	}
	return out
}

// referenceRun is reference i of an exploration of base references: the
// i-th of References, and past base the same mix again (i modulo base),
// with seeds following.
func referenceRun(s *scenarios.Scenario, seed uint64, i, base int) RefRun {
	r := *s
	r.Faults = nil
	if k := i % max(base, 2); k >= 2 {
		late := lateStarts[(k-2)%len(lateStarts)] * time.Duration(1+(k-2)/len(lateStarts))
		r.Controller.StartAfter += reports.Duration(late)
		if r.Timing.Deadline > 0 {
			r.Timing.Deadline += reports.Duration(late) // as long to converge once started
		}
	}
	return RefRun{Scenario: &r, Seed: seed + uint64(i)}
}

// NewPlan learns from the reference runs of s (at least two, the same
// scenario with different seeds) and lists the points to run. extra masks
// add to the defaults.
func NewPlan(s *scenarios.Scenario, backend string, seed uint64, refs []*reports.Result, extra Masks) (*Plan, error) {
	if err := Check(s); err != nil {
		return nil, err
	}
	if err := extra.Validate(); err != nil {
		return nil, err
	}
	if len(refs) < 2 {
		return nil, errors.New("an exploration needs at least two reference runs, to tell what varies between runs from what a fault changed")
	}
	for i, r := range refs {
		if r.Error != "" {
			return nil, fmt.Errorf("reference run %d (seed %d) could not be carried out: %s", i+1, r.Seed, text.FirstLine(r.Error))
		}
	}
	p := &Plan{Schema: PlanSchema, Scenario: s, Backend: backend, Seed: seed, References: refs, Counts: map[string][]EventCount{}}
	p.Masks = DefaultMasks().With(extra).With(worldsStatus(refs))
	p.Volatile = deletedByOthers(refs)
	// Learn: what the references disagree on is noise, never judged.
	p.Noise = noiseOf(refs, p.Masks)
	p.Learned.Paths = slices.Clone(p.Noise.Fields)
	p.Masks = p.Masks.With(p.Learned)
	// Counts are compared for the objects the controller itself created,
	// updated or deleted in a reference: pods the world made for a
	// Deployment come and go with the world's timing.
	written := map[string]bool{}
	for _, r := range refs {
		for obj := range writtenBy(r) {
			written[obj] = true
		}
	}
	seenIn := map[string]int{}
	for _, r := range refs {
		for obj, c := range eventCounts(r) {
			seenIn[obj]++
			if written[obj] && !slices.Contains(p.Counts[obj], c) {
				p.Counts[obj] = append(p.Counts[obj], c)
			}
		}
	}
	for obj := range p.Counts {
		if seenIn[obj] < len(refs) || p.Volatile[obj] || slices.Contains(p.Noise.Counts, obj) {
			delete(p.Counts, obj)
		}
	}
	p.Seen = map[string]bool{}
	for obj, n := range seenIn {
		if n == len(refs) {
			p.Seen[obj] = true
		}
	}
	deterministic := func(object string) bool { return p.Seen[object] }
	p.Points, p.Found, p.Steps = enumerate(refs[0], deterministic)
	return p, nil
}

// ScenarioOf is the scenario that runs pt: the plan's, with the point's
// fault and a name of its own.
func (p *Plan) ScenarioOf(pt Point) *scenarios.Scenario {
	s := *p.Scenario
	s.Name = pointName(p.Scenario.Name, pt.ID)
	s.Description = fmt.Sprintf("%s, with one fault: %s (%s)", p.Scenario.Name, pt.Signature, pt.About)
	s.Faults = append([]chaos.Spec{pt.Fault}, pt.Also...)
	if s.Controller.RestartAfter == 0 && chaos.EndsInstance(pt.Fault.Fault) {
		s.Controller.RestartAfter = reports.Duration(restartAfter)
	}
	return &s
}

// pointName is "baseline-p017", cut to fit a scenario name.
func pointName(scenario, id string) string {
	suffix := "-" + id
	if len(scenario)+len(suffix) > scenarios.MaxNameLength {
		scenario = strings.TrimRight(scenario[:scenarios.MaxNameLength-len(suffix)], "-")
	}
	return scenario + suffix
}

// Write saves p as JSON.
func (p *Plan) Write(path string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadPlan loads a plan Write saved.
func ReadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: not an exploration plan: %w", path, err)
	}
	if p.Schema != PlanSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, p.Schema, PlanSchema)
	}
	if p.Scenario == nil {
		return nil, fmt.Errorf("%s: the plan has no scenario", path)
	}
	return &p, nil
}

// Shard is the points of shard i (0-based) of n: every n-th point.
func (p *Plan) Shard(i, n int) []Point { return shard(p.Points, i, n) }

// shard is every n-th of list from its i-th; all of it when n <= 1.
func shard[T any](list []T, i, n int) []T {
	var out []T
	for k, x := range list {
		if n <= 1 || k%n == i {
			out = append(out, x)
		}
	}
	return out
}

// countField stands for how many objects of one generateName there are.
const countField = "(count)"

type flatObject struct {
	kind, name string
	fields     map[string]string
}

// flatEnd is the end state of r, masked, keyed by kind and name. Objects
// with a generated name are keyed by their generateName and a count, so
// pods of one ReplicaSet compare by how many there are.
func flatEnd(r *reports.Result, m Masks) map[string]flatObject {
	out := map[string]flatObject{}
	generatedCount := map[string]int{}
	for _, o := range r.History.End {
		md, _ := o.Object["metadata"].(map[string]any)
		if gen, _ := md["generateName"].(string); gen != "" {
			generatedCount[o.Kind+"\x00"+gen+"*"]++
			continue
		}
		fields := map[string]string{}
		for k, v := range flatten(o.Object) {
			if !m.masked(o.Kind, field(k)) {
				fields[k] = v
			}
		}
		out[o.Kind+"\x00"+o.Name] = flatObject{kind: o.Kind, name: o.Name, fields: fields}
	}
	for key, n := range generatedCount {
		kind, name, _ := strings.Cut(key, "\x00")
		fields := map[string]string{}
		if !m.masked(kind, countField) {
			fields[countField] = fmt.Sprint(n)
		}
		out[key] = flatObject{kind: kind, name: name, fields: fields}
	}
	return out
}

// diffFields are the fields (indexes as [*]) whose values differ between
// a and b, or that one has and the other has not.
func diffFields(a, b map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if bv, ok := b[k]; !ok || bv != a[k] {
			out = appendNew(out, field(k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = appendNew(out, field(k))
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// eventCounts are the ADDED and DELETED events per object (resource/name)
// the observer saw in r.
func eventCounts(r *reports.Result) map[string]EventCount {
	out := map[string]EventCount{}
	for _, e := range r.History.Events {
		key := e.Resource + "/" + e.Name
		c := out[key]
		switch e.Type {
		case "ADDED":
			c.Added++
		case "DELETED":
			c.Deleted++
		}
		out[key] = c
	}
	return out
}

// worldsStatus masks the status of each kind whose status the controller
// never wrote in a reference: another actor (the world, a kube
// controller) writes it, and it moves with that actor's timing. The
// scenario's goal and invariants still judge it.
func worldsStatus(refs []*reports.Result) Masks {
	resourceOf := map[string]string{} // kind -> resource, joined by object name
	statusWritten := map[string]bool{}
	for _, r := range refs {
		byName := map[string]string{}
		for _, e := range r.History.Events {
			byName[e.Name] = e.Resource
		}
		for _, o := range r.History.End {
			if res, ok := byName[o.Name]; ok {
				resourceOf[o.Kind] = res
			}
		}
		for _, q := range r.History.Requests {
			if res, sub, ok := strings.Cut(q.Resource, "/"); ok && sub == "status" && writesOne(q.Verb) {
				statusWritten[res] = true
			}
		}
	}
	var m Masks
	for _, kind := range sortedKeys(resourceOf) {
		if !statusWritten[resourceOf[kind]] {
			m.Paths = append(m.Paths, shortKind(kind)+":status")
		}
	}
	return m
}

// deletedByOthers are the objects (resource/name) deleted in a reference
// with no delete of them by the controller.
func deletedByOthers(refs []*reports.Result) map[string]bool {
	out := map[string]bool{}
	for _, r := range refs {
		deletes := map[string]bool{}
		for _, q := range r.History.Requests {
			if q.Verb == "delete" {
				deletes[base(q.Resource)+"/"+q.Name] = true
			}
		}
		for _, e := range r.History.Events {
			if obj := e.Resource + "/" + e.Name; e.Type == "DELETED" && !deletes[obj] {
				out[obj] = true
			}
		}
	}
	return out
}

// writtenBy are the objects (resource/name) the controller wrote in r.
func writtenBy(r *reports.Result) map[string]bool {
	out := map[string]bool{}
	for _, q := range r.History.Requests {
		if writesOne(q.Verb) && q.Name != "" && q.Code >= 200 && q.Code < 300 {
			out[base(q.Resource)+"/"+q.Name] = true
		}
	}
	return out
}
