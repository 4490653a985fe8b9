package expect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		src        string
		transition bool
		line, col  int
		// err is the whole Error(), or a prefix of it ending in "...".
		err string
	}{
		{
			name: "syntax error on the second line",
			src:  "object.spec.replicas == 1 ||\n  object.spec.paused && )",
			line: 2, col: 25,
			err: "line 2, column 25: Syntax error: mismatched input ')' expecting ...",
		},
		{
			name: "undeclared names on the third line, both listed",
			src:  "has(object.spec) &&\n\n  obj.x == 2 && y",
			line: 3, col: 3,
			err: "line 3, column 3: undeclared reference to 'obj' (in container ''); line 3, column 17: undeclared reference to 'y' (in container '')",
		},
		{
			name: "oldObject outside a transition rule",
			src:  "object.spec.replicas >= oldObject.spec.replicas",
			line: 1, col: 25,
			err: "column 25: undeclared reference to 'oldObject' (in container '')",
		},
		{
			name: "int result",
			src:  "object.spec.replicas + 1",
			line: 1, col: 1,
			err: "column 1: must evaluate to bool, not int",
		},
		{
			name: "string result, indented on line 2",
			src:  "\n   \"abc\"",
			line: 2, col: 4,
			err: "line 2, column 4: must evaluate to bool, not string",
		},
		{
			name: "null result",
			src:  "null",
			line: 1, col: 1,
			err: "column 1: must evaluate to bool, not null_type",
		},
		{
			name: "operands the checker can type",
			src:  "'x' + 1 == 2",
			line: 1, col: 5,
			err: "column 5: found no matching overload for '_+_' applied to '(string, int)'",
		},
		{
			name: "column counts characters",
			src:  "'héllo' == 'x' && )",
			line: 1, col: 19,
			err: "column 19: Syntax error: ...",
		},
		{name: "empty", src: "", line: 1, col: 1, err: "column 1: empty expression"},
		{name: "blank lines", src: " \n\t\n", line: 1, col: 1, err: "line 1, column 1: empty expression"},
		{
			name: "too long",
			src:  "true" + strings.Repeat(" ", MaxExpressionLength),
			line: 1, col: 1,
			err: "column 1: 10004 bytes long, more than 10000",
		},
		{
			name: "nested too deeply",
			src:  strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300),
			line: 1, col: 1,
			err: "column ...",
		},
		{
			name: "bad regex literal",
			src:  "object.metadata.name.matches('[')",
			line: 1, col: 30,
			err: "column 30: invalid matches argument",
		},
		{
			name:       "unknown function in a transition rule",
			src:        "frobnicate(oldObject)",
			transition: true,
			line:       1, col: 11,
			err: "column 11: undeclared reference to 'frobnicate' (in container '')",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Compile(tc.src, tc.transition)
			require.Error(t, err)
			assert.Nil(t, e)
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			if prefix, ok := strings.CutSuffix(tc.err, "..."); ok {
				assert.True(t, strings.HasPrefix(err.Error(), prefix), "error %q should begin %q", err, prefix)
			} else {
				assert.Equal(t, tc.err, err.Error())
			}
			if tc.name != "nested too deeply" {
				assert.Equal(t, tc.line, ce.Line, "line")
				assert.Equal(t, tc.col, ce.Column, "column")
			}
		})
	}
}

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		src        string
		transition bool
	}{
		{"has(object.status) && object.status.readyReplicas == object.spec.replicas", false},
		{"object.spec.replicas >= oldObject.spec.replicas", true},
		{"object.spec.replicas", false}, // dyn: checked at Eval
		{"quantity(object.spec.template.spec.containers[0].resources.limits.memory).isGreaterThan(quantity('512Mi'))", false},
		{"object.metadata.name.matches('^[a-z]+$') && url('https://example.com').getHost() == 'example.com'", false},
		{"isIP('10.0.0.1') && cidr('10.0.0.0/8').containsIP(ip('10.0.0.1'))", false},
		{"object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example/'))", false},
		{"sets.contains([1, 2, 3], [object.spec.replicas])", false},
	} {
		e, err := Compile(tc.src, tc.transition)
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.src, e.Source)
		assert.Equal(t, tc.transition, e.Transition())
	}
}

func TestEval(t *testing.T) {
	obj := deployment(t)
	old := deployment(t)
	old["spec"].(map[string]any)["replicas"] = int64(2)
	withNulls := decode(t, `{"spec": {"replicas": 3, "paused": null, "items": []}, "metadata": {"annotations": {"converge.dev/max-replicas": "2"}}}`)

	type want int
	const (
		isTrue want = iota
		isFalse
		missing
		failed
	)
	for _, tc := range []struct {
		src        string
		transition bool
		obj, old   map[string]any
		want       want
		// msg, when set, is in the error.
		msg string
	}{
		{src: "has(object.status) && object.status.readyReplicas == object.spec.replicas", obj: obj, want: isTrue},
		{src: "has(object.status) && object.status.readyReplicas == object.spec.replicas", obj: withNulls, want: isFalse},
		{src: "object.spec.replicas <= int(object.metadata.annotations['converge.dev/max-replicas'])", obj: obj, want: isTrue},
		{src: "object.spec.replicas <= int(object.metadata.annotations['converge.dev/max-replicas'])", obj: withNulls, want: isFalse},
		{src: "object.spec.replicas >= oldObject.spec.replicas", transition: true, obj: obj, old: old, want: isTrue},
		{src: "object.spec.replicas >= oldObject.spec.replicas", transition: true, obj: old, old: obj, want: isFalse},
		{src: "object.spec.replicas == oldObject.spec.replicas", transition: true, obj: obj, want: missing, msg: "no oldObject"},
		{src: "object.spec.replicas < 3.5 && object.spec.replicas > 2.5", obj: obj, want: isTrue},
		{src: "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')", obj: obj, want: isTrue},
		{src: "quantity(object.spec.template.spec.containers[0].resources.limits.memory) == quantity('1024Mi')", obj: obj, want: isTrue},
		{src: "quantity(object.spec.template.spec.containers[0].resources.requests.cpu).isLessThan(quantity('1'))", obj: obj, want: isTrue},
		{src: "object.spec.template.spec.containers.map(c, c.name) == ['web', 'proxy']", obj: obj, want: isTrue},
		{src: "'%s/%s'.format([object.metadata.namespace, object.metadata.name]) == 'shop/web'", obj: obj, want: isTrue},
		{src: "object.spec.replicas", obj: obj, want: failed, msg: "result is int, not bool"},
		// Fields that are not there (yet).
		{src: "object.status.readyReplicas == 3", obj: withNulls, want: missing, msg: "no such key: status"},
		{src: "object.metadata.labels.app == 'web'", obj: withNulls, want: missing, msg: "no such key: labels"},
		{src: "object.spec.items[0] == 1", obj: withNulls, want: missing, msg: "index out of bounds"},
		{src: "object.spec.paused > 1", obj: withNulls, want: missing, msg: "on null"},
		{src: "object.spec.paused.size() == 0", obj: withNulls, want: missing, msg: "on null"},
		{src: "!object.spec.paused", obj: withNulls, want: missing, msg: "on null"},
		{src: "object.spec.paused.x == 1", obj: withNulls, want: missing},
		{src: "object.spec.paused", obj: withNulls, want: missing, msg: "result is null"},
		{src: "object.spec.paused == null", obj: withNulls, want: isTrue},
		{src: "object.kind == 'Deployment'", obj: nil, want: missing},
		// Failures that waiting will not fix.
		{src: "object.spec.replicas / 0 == 1", obj: obj, want: failed, msg: "division by zero"},
		{src: "object.spec.replicas > 'a'", obj: obj, want: failed, msg: "no such overload"},
		{src: "int(object.metadata.name) == 1", obj: obj, want: failed},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, err := Compile(tc.src, tc.transition)
			require.NoError(t, err)
			got, err := e.Eval(tc.obj, tc.old)
			switch tc.want {
			case isTrue, isFalse:
				require.NoError(t, err)
				assert.Equal(t, tc.want == isTrue, got)
			case missing:
				require.ErrorIs(t, err, ErrMissing)
				assert.NotErrorIs(t, err, ErrEval)
			case failed:
				require.ErrorIs(t, err, ErrEval)
				assert.NotErrorIs(t, err, ErrMissing)
			}
			if tc.msg != "" {
				assert.ErrorContains(t, err, tc.msg)
			}
		})
	}
}

// TestEvalLimits checks that expensive expressions end quickly with
// ErrEval: by the cost limit, or by the limits cel-go's cost tracker
// misses (time quadratic in a loop's length, strings it does not count).
func TestEvalLimits(t *testing.T) {
	items := make([]any, 2000)
	for i := range items {
		items[i] = map[string]any{"name": "item", "n": int64(i), "tags": []any{"a", "b", "c"}}
	}
	obj := map[string]any{"spec": map[string]any{
		"items": items,
		"many":  make([]any, MaxRange+1),
		"nine":  make([]any, 9000),
		"text":  strings.Repeat("x", 100_000),
		"kilo":  strings.Repeat("x", 1000),
		"x":     "x",
	}}
	for _, tc := range []struct{ src, msg string }{
		// The cost limit.
		{"lists.range(1000).all(i, !object.spec.text.contains('y'))", "cost limit of 1000000 exceeded"},
		{"lists.range(1000000).size() > 0", "cost limit of 1000000 exceeded"},
		{"lists.range(300).all(i, lists.range(300).all(j, !object.spec.kilo.contains('y')))", "cost limit of 1000000 exceeded"},
		// Iteration.
		{"object.spec.items.all(a, object.spec.nine.all(b, a != b))", "comprehension over 9000 elements inside loops over 2000: too much iteration"},
		{"object.spec.many.all(x, true)", "comprehension over 10001 elements, more than 10000"},
		{"lists.range(100000).map(i, object.spec.text).join('').size() > 0", "comprehension over 100000 elements, more than 10000"},
		// The outer loop is over a map()'s result.
		{"object.spec.items.map(a, a).all(a, object.spec.nine.all(b, a != b))", "comprehension over 9000 elements inside loops over 2000: too much iteration"},
		// Strings. cel-go counts size() as constant, and + of two fields
		// not at all.
		{"lists.range(300).all(i, lists.range(300).all(j, object.spec.text.size() > i + j))", "strings read exceed 67108864 bytes"},
		{"lists.range(2000).all(i, object.spec.text.size() > 0) || true", "strings read exceed 67108864 bytes"},
		{"object.spec.text.replace(object.spec.x, object.spec.text).size() > 0", "replace would build a string of 10000000000 bytes"},
		{"object.spec.items.map(a, a.name).join(object.spec.text).size() > 0", "join would build a string of 199908000 bytes"},
		{"object.spec.items.map(a, object.spec.text + object.spec.text).size() > 0", "strings built exceed 10485760 bytes"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, err := Compile(tc.src, false)
			require.NoError(t, err)
			_, err = e.Eval(obj, nil)
			require.ErrorIs(t, err, ErrEval)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

// TestEvalWithinLimits checks that the limits leave ordinary work alone,
// and that replace and join, run by the limits, behave as cel-go's.
func TestEvalWithinLimits(t *testing.T) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = map[string]any{"name": "item", "n": int64(i), "tags": []any{"a", "b", "c"}}
	}
	obj := map[string]any{"spec": map[string]any{"items": items, "text": strings.Repeat("x", 1000), "list": []any{"a", "b"}}}
	for _, src := range []string{
		"object.spec.items.all(a, a.tags.exists(t, t == 'c'))",
		"object.spec.items.filter(a, a.n % 2 == 0).map(a, a.name + '-' + string(a.n)).size() == 500",
		"[1, 2, 3].all(x, [4, 5].all(y, x < y))",
		"object.spec.text.replace('x', 'yy').size() == 2000",
		"object.spec.text.replace('x', 'yy', 3).size() == 1003",
		"'abc'.replace('', '-') == '-a-b-c-'",
		"object.spec.list.join() == 'ab' && object.spec.list.join(', ') == 'a, b'",
		"object.spec.items.map(a, a.name).join(',').size() == 4999",
		"[].join('-') == ''",
	} {
		e, err := Compile(src, false)
		require.NoError(t, err, src)
		got, err := e.Eval(obj, nil)
		require.NoError(t, err, src)
		assert.True(t, got, src)
	}
	e, err := Compile("object.spec.items.join(',') == ''", false)
	require.NoError(t, err)
	_, err = e.Eval(obj, nil)
	require.ErrorIs(t, err, ErrEval, "join of maps fails as in cel-go")
}

func TestEvalContextCancelled(t *testing.T) {
	e, err := Compile("lists.range(10000).all(i, i >= 0)", false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.EvalContext(ctx, map[string]any{}, nil)
	require.ErrorIs(t, err, ErrEval)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestEvalConcurrent(t *testing.T) {
	e, err := Compile("object.spec.replicas % 2 == 0 && object.metadata.name.startsWith('d')", false)
	require.NoError(t, err)
	missingStatus, err := Compile("object.status.replicas > 0 && object.spec.x > 1", false)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := int64(g*1000 + i)
				obj := map[string]any{"metadata": map[string]any{"name": "d"}, "spec": map[string]any{"replicas": n, "x": nil}}
				got, err := e.Eval(obj, nil)
				if err != nil || got != (n%2 == 0) {
					errs <- errors.Join(errors.New("wrong result"), err)
					return
				}
				obj["status"] = map[string]any{"replicas": int64(1)}
				if _, err := missingStatus.Eval(obj, nil); !errors.Is(err, ErrMissing) {
					errs <- errors.Join(errors.New("want ErrMissing"), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A rule across objects reads objects, a map from kind to a list; a kind
// it names that is not there is "not yet", like a missing field.
func TestEvalAcross(t *testing.T) {
	e, err := CompileAcross("objects.WebApp.exists(w, w.metadata.name == object.metadata.ownerReferences[0].name)")
	require.NoError(t, err)
	assert.True(t, e.Across())
	child := map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{"name": "shop"}}}}
	shop := map[string]any{"metadata": map[string]any{"name": "shop"}}
	held, err := e.EvalAcross(child, map[string]any{"WebApp": []any{shop}})
	require.NoError(t, err)
	assert.True(t, held)
	held, err = e.EvalAcross(child, map[string]any{"WebApp": []any{}})
	require.NoError(t, err)
	assert.False(t, held)
	_, err = e.EvalAcross(child, map[string]any{})
	assert.ErrorIs(t, err, ErrMissing)
	_, err = e.Eval(child, nil)
	assert.ErrorIs(t, err, ErrEval, "a rule across objects needs its objects")

	one, err := Compile("object.x == 1", false)
	require.NoError(t, err)
	_, err = one.EvalAcross(child, nil)
	assert.ErrorIs(t, err, ErrEval)
	_, err = Compile("objects.WebApp.size() == 0", false)
	assert.ErrorContains(t, err, "undeclared reference to 'objects'")
}

// A rule compiles once a process: the same source in the same environment
// gives the same expression, another environment another one, and a
// source that does not compile is not kept.
func TestARuleCompilesOnce(t *testing.T) {
	a, err := Compile("object.spec.replicas > 1", false)
	require.NoError(t, err)
	b, err := Compile("object.spec.replicas > 1", false)
	require.NoError(t, err)
	assert.Same(t, a, b)
	c, err := CompileAcross("object.spec.replicas > 1")
	require.NoError(t, err)
	assert.NotSame(t, a, c)
	assert.True(t, c.across)
	for range 2 {
		_, err = Compile("object.spec.replicas >", false)
		assert.Error(t, err)
	}
	_, kept := compiled.Get("object\x00object.spec.replicas >")
	assert.False(t, kept)

	// Bounded: past maxCompiled the cache starts again.
	for i := compiled.Len(); i < maxCompiled; i++ {
		compiled.Put(fmt.Sprintf("filler\x00%d", i), a)
	}
	_, err = Compile("object.spec.replicas > 2", false)
	require.NoError(t, err)
	assert.Equal(t, 1, compiled.Len())
}
