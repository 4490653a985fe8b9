package explore

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
)

// MaxReferencesFactor bounds the references an exploration takes when
// they disagree: at most this many times the base count.
const MaxReferencesFactor = 3

// Noise is what the references disagree on: a controller's own
// nondeterminism (a delay drawn at random, a name made up at random), or
// the world's. None of it is judged: a point's run may end with any value
// of a noisy metric.
type Noise struct {
	// Fields are end-state fields, as mask paths ("ConfigMap:data.token"),
	// whose values differ between two references.
	Fields []string `json:"fields,omitempty"`
	// Exists are the objects (resource/name) some references ended with
	// and others did not.
	Exists []string `json:"exists,omitempty"`
	// Families are the name families (resource/prefix: "configmaps/note-")
	// whose names differ between references: the controller names such
	// objects at random, so a name no reference had says nothing.
	Families []string `json:"families,omitempty"`
	// Counts are the objects (resource/name) the references saw added or
	// deleted a different number of times.
	Counts []string `json:"counts,omitempty"`
}

// Empty: the references agree on every metric judged.
func (n Noise) Empty() bool {
	return len(n.Fields)+len(n.Exists)+len(n.Families)+len(n.Counts) == 0
}

// coveredBy: every noisy metric of n is noisy in m too.
func (n Noise) coveredBy(m Noise) bool {
	sub := func(a, b []string) bool {
		return !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
	}
	return sub(n.Fields, m.Fields) && sub(n.Exists, m.Exists) && sub(n.Families, m.Families) && sub(n.Counts, m.Counts)
}

// noiseOf is what refs disagree on beyond masks m.
func noiseOf(refs []*reports.Result, m Masks) Noise {
	var n Noise
	// Fields: every field that differs between two references.
	ends := make([]map[string]flatObject, len(refs))
	for i, r := range refs {
		ends[i] = flatEnd(r, Masks{})
	}
	for i := range ends {
		for _, other := range ends[i+1:] {
			for obj, a := range ends[i] {
				b, ok := other[obj]
				if !ok {
					continue
				}
				for _, f := range diffFields(a.fields, b.fields) {
					if !m.masked(a.kind, f) {
						n.Fields = appendNew(n.Fields, shortKind(a.kind)+":"+f)
					}
				}
			}
		}
	}
	// Exists: objects not at the end of every reference.
	endsWith := map[string]int{}
	for _, r := range refs {
		for _, obj := range endNames(r) {
			endsWith[obj]++
		}
	}
	for obj, k := range endsWith {
		if k < len(refs) {
			n.Exists = append(n.Exists, obj)
		}
	}
	// Families: a family whose names are not the same in every reference.
	names := make([]map[string]map[string]bool, len(refs))
	all := map[string]bool{}
	for i, r := range refs {
		names[i] = map[string]map[string]bool{}
		objs := slices.Concat(endNames(r), slices.Collect(maps.Keys(eventCounts(r))))
		for _, obj := range objs {
			f := family(obj)
			if names[i][f] == nil {
				names[i][f] = map[string]bool{}
			}
			names[i][f][obj] = true
			all[f] = true
		}
	}
	for f := range all {
		for _, ns := range names[1:] {
			if !maps.Equal(ns[f], names[0][f]) {
				n.Families = append(n.Families, f)
				break
			}
		}
	}
	// Counts: an object's additions and deletions differ between two.
	counts := make([]map[string]EventCount, len(refs))
	for i, r := range refs {
		counts[i] = eventCounts(r)
	}
	for obj, c := range counts[0] {
		for _, other := range counts[1:] {
			if o, ok := other[obj]; ok && o != c {
				n.Counts = append(n.Counts, obj)
				break
			}
		}
	}
	slices.Sort(n.Fields)
	slices.Sort(n.Exists)
	slices.Sort(n.Families)
	slices.Sort(n.Counts)
	return n
}

// endNames are the objects (resource/name) r ended with; the kind stands
// for the resource where the history does not name it.
func endNames(r *reports.Result) []string {
	resourceOf := resourcesOf(r)
	out := make([]string, 0, len(r.History.End))
	for _, o := range r.History.End {
		res := resourceOf[o.Kind]
		if res == "" {
			res = shortKind(o.Kind)
		}
		out = append(out, res+"/"+o.Name)
	}
	return out
}

// resourcesOf maps the kinds ("apps/v1 Deployment") of r to their
// resources.
func resourcesOf(r *reports.Result) map[string]string {
	out := map[string]string{}
	for res, kind := range r.History.Resources {
		out[kind] = res
	}
	for _, e := range r.History.Events {
		if e.Kind != "" {
			out[e.Kind] = e.Resource
		}
	}
	return out
}

// family is the name family of an object (resource/name): its name
// without the last dash-separated part.
func family(obj string) string {
	res, name, _ := strings.Cut(obj, "/")
	return res + "/" + prefix(name)
}

// MoreReferences are the reference runs to take after refs, the runs of s
// so far (base of them asked for): none when the references agree on every
// metric judged, or when the last base of them showed no disagreement the
// ones before had not, or once MaxReferencesFactor times base have run.
// Otherwise the next base runs, in the same mix of prompt and late starts
// as the first ones, so that a controller's own randomness shows in the
// references before any point is judged against them. extra are the masks
// the plan will add to the defaults.
func MoreReferences(s *scenarios.Scenario, seed uint64, base int, refs []*reports.Result, extra Masks) []RefRun {
	base = max(base, 2)
	if len(refs) < base || len(refs) >= MaxReferencesFactor*base {
		return nil
	}
	for _, r := range refs {
		if r.Error != "" || len(verdictDifferences(r)) > 0 {
			return nil // the exploration stops at a failing reference
		}
	}
	m := DefaultMasks().With(extra).With(worldsStatus(refs))
	n := noiseOf(refs, m)
	if n.Empty() || len(refs) >= 2*base && n.coveredBy(noiseOf(refs[:len(refs)-base], m)) {
		return nil
	}
	out := make([]RefRun, base)
	for i := range out {
		out[i] = referenceRun(s, seed, len(refs)+i, base)
	}
	return out
}

// firstStart is when r's first instance started, from the run's start.
func firstStart(r *reports.Result) time.Duration {
	if len(r.History.Lives) == 0 {
		return 0
	}
	return r.History.Lives[0].Started.Sub(runStart(r))
}

// runStart is when r's history began.
func runStart(r *reports.Result) time.Time {
	if r.History.Start.IsZero() {
		return r.Started
	}
	return r.History.Start
}
