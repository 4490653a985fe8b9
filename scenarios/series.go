package scenarios

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/check"
	"github.com/converge-lab/converge/scenarios/expect"
)

// Bounds on what a run charts: a scenario of thousands of objects charts
// the first objects it sees, and a field that changes without end keeps
// its first points.
const (
	maxSeries      = 256
	maxSeriesPoint = 5000
)

// charted is what the report charts of the objects one selector picks:
// the fields the scenario's invariants and goal name.
type charted struct {
	sel    Selector
	labels labels.Selector
	fields []string
	// conditions are the condition types the goal matches
	// (status.conditions[Available]).
	conditions map[string][]string // list path -> types
}

// objectField finds the fields a CEL rule reads from object: each chain
// of plain selections after "object.".
var objectField = regexp.MustCompile(`\bobject((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)

// chartedFields is, per selector of the scenario's invariants and goal,
// the fields they name.
func chartedFields(s *Scenario) []*charted {
	var out []*charted
	find := func(sel Selector) *charted {
		for _, c := range out {
			if c.sel == sel {
				return c
			}
		}
		ls, _ := labels.Parse(sel.Labels)
		c := &charted{sel: sel, labels: ls, conditions: map[string][]string{}}
		out = append(out, c)
		return c
	}
	fromRule := func(c *charted, rule string) {
		for _, m := range objectField.FindAllStringSubmatch(rule, -1) {
			path := strings.TrimPrefix(m[1], ".")
			if path == "metadata" || (strings.HasPrefix(path, "metadata.") && path != "metadata.generation") {
				continue // names, labels and owners: not values over time
			}
			if !slices.Contains(c.fields, path) {
				c.fields = append(c.fields, path)
			}
		}
	}
	for _, inv := range s.Invariants {
		fromRule(find(inv.Select), inv.Rule)
	}
	for _, e := range s.Goal.Objects {
		c := find(e.Select)
		fromRule(c, e.Condition)
		matchFields(c, "", e.Match)
	}
	return slices.DeleteFunc(out, func(c *charted) bool { return len(c.fields) == 0 && len(c.conditions) == 0 })
}

// matchFields adds the numeric and boolean leaves of a goal's partial
// object, and the types of the conditions it lists.
func matchFields(c *charted, prefix string, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if prefix == "" && k == "metadata" {
			continue
		}
		switch v := m[k].(type) {
		case map[string]any:
			matchFields(c, path, v)
		case []any:
			for _, e := range v {
				if cond, ok := e.(map[string]any); ok {
					if t, ok := cond["type"].(string); ok && cond["status"] != nil && !slices.Contains(c.conditions[path], t) {
						c.conditions[path] = append(c.conditions[path], t)
					}
				}
			}
		case bool, int, int64, float64:
			if !slices.Contains(c.fields, path) {
				c.fields = append(c.fields, path)
			}
		}
	}
}

// values reads the charted fields of u: numbers as they are, booleans as 0
// and 1, a condition as 1 while its status is "True".
func (c *charted) values(u *unstructured.Unstructured) map[string]float64 {
	out := map[string]float64{}
	for _, f := range c.fields {
		v, ok := expect.Field(u.Object, f)
		if !ok {
			continue
		}
		if b, ok := v.(bool); ok {
			out[f] = boolValue(b)
		} else if n, ok := expect.Number(v); ok {
			out[f] = n
		}
	}
	for path, types := range c.conditions {
		list, _ := expect.Field(u.Object, path)
		items, _ := list.([]any)
		for _, t := range types {
			for _, it := range items {
				cond, _ := it.(map[string]any)
				if cond["type"] == t {
					out[path+"["+t+"]"] = boolValue(cond["status"] == "True")
				}
			}
		}
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// seriesKey names one series of a run.
type seriesKey struct{ kind, name, field string }

// chart records the charted fields of u at now, a point per field whose
// value changed.
func (h *history) chart(charts []*charted, kind string, u *unstructured.Unstructured, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range charts {
		if c.sel.APIVersion+" "+c.sel.Kind != kind || !check.Matches(c.sel.Name, c.labels, u) {
			continue
		}
		vals := c.values(u)
		fields := make([]string, 0, len(vals))
		for f := range vals {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			k := seriesKey{kind, u.GetName(), f}
			i, ok := h.series[k]
			if !ok {
				if len(h.h.Series) >= maxSeries {
					continue
				}
				i = len(h.h.Series)
				h.series[k] = i
				h.h.Series = append(h.h.Series, reports.Series{Kind: kind, Name: u.GetName(), Field: f})
			}
			s := &h.h.Series[i]
			if n := len(s.Points); (n > 0 && s.Points[n-1].Value == vals[f]) || n >= maxSeriesPoint {
				continue
			}
			s.Points = append(s.Points, reports.Point{At: now, Value: vals[f]})
		}
	}
}
