package expect

import (
	"errors"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzMatch checks that Match never panics, stays within MaxMismatches,
// prints every mismatch, and that any value matches itself.
func FuzzMatch(f *testing.F) {
	f.Add(`{"a": [{"b": 1}, {"b": 1, "c": 2}]}`, `{"a": [{"b": 1, "c": 2}, {"b": 1}]}`)
	f.Add(`{"spec": {"replicas": 3, "paused": null}}`, `{"spec": {"replicas": "3"}}`)
	f.Add(`{"m": "1Gi", "c": "500m", "n": 1e3}`, `{"m": "1024Mi", "c": 0.5, "n": "1k"}`)
	f.Add(`[[1, [2, [3]]], {"a.b/c": []}]`, `[{"a.b/c": [0]}, [[[3], 2], 1, 0]]`)
	f.Add(`[1, 1, 1, 1]`, `[1, 1, 1]`)
	f.Add(`"x"`, `null`)
	f.Add(`{"":{"":{"":[null, true, "True", -0.0, 1e400]}}}`, `{"":{"":{}}}`)
	f.Fuzz(func(t *testing.T, expected, actual string) {
		var e, a any
		if utiljson.Unmarshal([]byte(expected), &e) != nil || utiljson.Unmarshal([]byte(actual), &a) != nil {
			return
		}
		got := Match(e, a)
		if len(got) > MaxMismatches {
			t.Fatalf("%d mismatches", len(got))
		}
		for _, m := range got {
			if m.String() == "" {
				t.Fatalf("empty message for %#v", m)
			}
		}
		for _, v := range []any{e, a} {
			for _, m := range Match(v, v) {
				if m.Reason != ReasonTooDeep {
					t.Fatalf("%s does not match itself: %s", v, m)
				}
			}
		}
	})
}

// FuzzCompile checks that Compile and Eval never panic, that compile
// errors say where, and that evaluation errors are classified.
func FuzzCompile(f *testing.F) {
	for _, src := range []string{
		"has(object.status) && object.status.readyReplicas == object.spec.replicas",
		"object.spec.replicas <= int(object.metadata.annotations['converge.dev/max-replicas'])",
		"object.spec.replicas >= oldObject.spec.replicas",
		"object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
		"quantity(object.spec.template.spec.containers[0].resources.limits.memory).isGreaterThan(quantity('1Gi'))",
		"object.metadata.name.matches('^[a-z]+$') && object.metadata.name.replace('w', 'ww').size() > 0",
		"lists.range(50).map(i, string(i)).join(',').size() > 0",
		"object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example/'))",
		"object.spec.x.y.z[0]['q'] == null",
		"((((true))))",
		"object.spec.replicas +",
		"'unterminated",
		"1 / 0 == 1",
		"[1, 2, 3].exists_one(x, x > 2) ? 'a' : 'b'",
	} {
		f.Add(src, strings.Contains(src, "oldObject"))
	}
	obj := decode(f, deploymentJSON)
	f.Fuzz(func(t *testing.T, src string, transition bool) {
		e, err := Compile(src, transition)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || ce.Line < 1 || ce.Column < 1 {
				t.Fatalf("compile error without a position: %v", err)
			}
			return
		}
		_, err = e.Eval(obj, obj)
		if err != nil && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrEval) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}

// FuzzParsePath checks that ParsePath never panics, that what it accepts
// prints back to a path that parses the same, and that Field agrees.
func FuzzParsePath(f *testing.F) {
	for _, p := range []string{
		"status.readyReplicas", `metadata.annotations["converge.dev/max-replicas"]`, "spec.items[0].name",
		`a['b.c'][3]`, ".a", "a..b", `a["\u00e9\n"]`, "a[99999999999]", `a["b`, "[0]",
	} {
		f.Add(p)
	}
	obj := decode(f, deploymentJSON)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		_, found := Field(obj, s)
		if err != nil {
			if found {
				t.Fatalf("Field found a malformed path %q", s)
			}
			return
		}
		again, err := ParsePath(p.String())
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, p.String(), err)
		}
		if again.String() != p.String() || len(again) != len(p) {
			t.Fatalf("%q printed as %q parses as %q", s, p.String(), again.String())
		}
	})
}
