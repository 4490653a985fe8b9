package check

import (
	"encoding/json"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/converge-lab/converge/reports"
)

// Seen is the world as the observer saw it, rebuilt from the history's
// events in the order they were recorded: what the goal and the write
// rules are judged on, during the run and from a saved history alike.
type Seen struct {
	applied  int // events of the history applied so far
	latest   map[objectKey]map[string]any
	versions map[objectKey][]map[string]any // the last keptVersions, oldest first
	last     map[objectKey]map[string]any   // the last version, kept after a deletion
	kinds    map[string]schema.GroupVersionKind
}

// keptVersions is how many versions of an object are kept for the write
// rules: an update is judged against the version it was based on, which
// the observer saw shortly before.
const keptVersions = 16

type objectKey struct {
	resource, namespace, name string
}

// NewSeen starts from nothing, knowing the kinds of resources (as
// History.Resources holds them).
func NewSeen(resources map[string]string) *Seen {
	s := &Seen{latest: map[objectKey]map[string]any{}, versions: map[objectKey][]map[string]any{},
		last: map[objectKey]map[string]any{}, kinds: map[string]schema.GroupVersionKind{}}
	for resource, kind := range resources {
		s.kinds[resource] = parseKind(kind)
	}
	return s
}

// UpTo applies events[s.applied:n].
func (s *Seen) UpTo(events []reports.WatchEvent, n int) {
	for ; s.applied < min(n, len(events)); s.applied++ {
		s.apply(events[s.applied])
	}
}

// apply applies one event; one without an object (a judge's, for the
// timeline) changes nothing.
func (s *Seen) apply(e reports.WatchEvent) {
	if e.Object == nil {
		return
	}
	if _, ok := s.kinds[e.Resource]; !ok {
		s.kinds[e.Resource] = parseKind(e.Kind)
	}
	key := objectKey{e.Resource, e.Namespace, e.Name}
	s.last[key] = e.Object
	if e.Type == "DELETED" {
		delete(s.latest, key)
		delete(s.versions, key)
		return
	}
	s.latest[key] = e.Object
	vs := append(s.versions[key], e.Object)
	s.versions[key] = vs[max(len(vs)-keptVersions, 0):]
}

// parseKind reads "apps/v1 Deployment".
func parseKind(kind string) schema.GroupVersionKind {
	apiVersion, k, _ := strings.Cut(kind, " ")
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(k)
}

// Version is an object as seen at resourceVersion rv, or its latest
// version when rv is empty; nil when not seen.
func (s *Seen) Version(resource, namespace, name, rv string) map[string]any {
	key := objectKey{resource, namespace, name}
	if rv == "" {
		return s.latest[key]
	}
	for _, obj := range s.versions[key] {
		if (&unstructured.Unstructured{Object: obj}).GetResourceVersion() == rv {
			return obj
		}
	}
	return nil
}

// ByKind are the objects of each of kinds (by name: Deployment), in order
// of namespace and name, as a rule across objects reads them.
func (s *Seen) ByKind(kinds []string) map[string]any {
	out := make(map[string]any, len(kinds))
	for _, k := range kinds {
		var keys []objectKey
		for key := range s.latest {
			if s.kinds[key.resource].Kind == k {
				keys = append(keys, key)
			}
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].namespace != keys[j].namespace {
				return keys[i].namespace < keys[j].namespace
			}
			return keys[i].name < keys[j].name
		})
		items := make([]any, 0, len(keys))
		for _, key := range keys {
			items = append(items, s.latest[key])
		}
		out[k] = items
	}
	return out
}

// Selected are the objects sel matches, by name.
func (s *Seen) Selected(sel Selector) []*unstructured.Unstructured {
	ls, err := labels.Parse(sel.Labels)
	if err != nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for key, obj := range s.latest {
		gvk := s.kinds[key.resource]
		if gvk.GroupVersion().String() != sel.APIVersion || gvk.Kind != sel.Kind {
			continue
		}
		if u := (&unstructured.Unstructured{Object: obj}); Matches(sel.Name, ls, u) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetName() != out[j].GetName() {
			return out[i].GetName() < out[j].GetName()
		}
		return out[i].GetNamespace() < out[j].GetNamespace()
	})
	return out
}

// Selects reports whether sel matches obj, an object of resource.
func (s *Seen) Selects(sel Selector, resource string, obj map[string]any) bool {
	gvk, ok := s.kinds[resource]
	if !ok || sel.APIVersion != gvk.GroupVersion().String() || sel.Kind != gvk.Kind {
		return false
	}
	ls, err := labels.Parse(sel.Labels)
	if err != nil {
		return false
	}
	return Matches(sel.Name, ls, &unstructured.Unstructured{Object: obj})
}

// Record is u as the history keeps it: without managedFields, and with
// its numbers as a saved history reads them back (see normalized).
func Record(u *unstructured.Unstructured) map[string]any {
	obj := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		obj[k] = v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		if _, has := md["managedFields"]; has {
			c := make(map[string]any, len(md))
			for k, v := range md {
				if k != "managedFields" {
					c[k] = v
				}
			}
			obj["metadata"] = c
		}
	}
	return normalized(obj).(map[string]any)
}

// normalized gives numbers one representation whether an object comes
// from a client (int64 for integers, float64 otherwise) or from a saved
// history (float64): integers as int64, the rest as float64. Maps and
// lists are copied only where a number in them changes.
func normalized(v any) any {
	n, _ := numbers(v)
	return n
}

func numbers(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			n, changed := numbers(e)
			if !changed {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			out[k] = n
		}
		if out == nil {
			return x, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range x {
			n, changed := numbers(e)
			if !changed {
				continue
			}
			if out == nil {
				out = append([]any(nil), x...)
			}
			out[i] = n
		}
		if out == nil {
			return x, false
		}
		return out, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, true
		}
		f, _ := x.Float64()
		return f, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	}
	return v, false
}

// Watched records the kind of a resource the observer watches.
func (s *Seen) Watched(resource string, gvk schema.GroupVersionKind) {
	s.kinds[resource] = gvk
}

// End is every object seen, sorted by kind and name.
func (s *Seen) End() []reports.EndObject {
	out := make([]reports.EndObject, 0, len(s.latest))
	for key, obj := range s.latest {
		gvk := s.kinds[key.resource]
		out = append(out, reports.EndObject{Kind: gvk.GroupVersion().String() + " " + gvk.Kind, Name: key.name, Object: obj})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
