package expect

import (
	"fmt"
	"testing"
)

// A typical goal on a Deployment-sized object.
func BenchmarkEval(b *testing.B) {
	e, err := Compile("has(object.status) && object.status.readyReplicas == object.spec.replicas && "+
		"object.spec.replicas <= int(object.metadata.annotations['converge.dev/max-replicas'])", false)
	if err != nil {
		b.Fatal(err)
	}
	obj := deployment(b)
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := e.Eval(obj, nil); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// A rule with a comprehension and strings, which the limits watch.
func BenchmarkEvalComprehension(b *testing.B) {
	e, err := Compile("object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') && "+
		"object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example/'))", false)
	if err != nil {
		b.Fatal(err)
	}
	obj := deployment(b)
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := e.Eval(obj, nil); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkCompile compiles one rule anew each time; BenchmarkCompileAgain
// is what a run pays for a rule compiled in an earlier run.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compileExpr("object.spec.replicas >= oldObject.spec.replicas", transitionEnv, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileAgain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("object.spec.replicas >= oldObject.spec.replicas", true); err != nil {
			b.Fatal(err)
		}
	}
}

// A goal's partial Deployment, with an unordered list of conditions.
func BenchmarkMatch(b *testing.B) {
	expected := y(b, `{
		"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "resources": {"limits": {"memory": "1024Mi"}}}]}}},
		"status": {"readyReplicas": 3, "conditions": [{"type": "Available", "status": "True"}]}
	}`)
	obj := deployment(b)
	b.ReportAllocs()
	for b.Loop() {
		if got := Match(expected, obj); len(got) != 0 {
			b.Fatal(got)
		}
	}
}

// Ten expected elements among a thousand.
func BenchmarkMatchLargeList(b *testing.B) {
	actual := make([]any, 1000)
	for i := range actual {
		actual[i] = map[string]any{"name": fmt.Sprintf("pod-%d", i), "phase": "Running", "ready": true}
	}
	expected := make([]any, 10)
	for i := range expected {
		expected[i] = map[string]any{"name": fmt.Sprintf("pod-%d", i*97), "ready": true}
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := Match(expected, actual); len(got) != 0 {
			b.Fatal(got)
		}
	}
}

func BenchmarkField(b *testing.B) {
	obj := deployment(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Field(obj, `metadata.annotations["converge.dev/max-replicas"]`); !ok {
			b.Fatal("not found")
		}
	}
}
