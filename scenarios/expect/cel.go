package expect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/converge-lab/converge/internal/bounded"
)

// MaxExpressionLength bounds an expression's source, in bytes.
const MaxExpressionLength = 10_000

// CostLimit is the runtime cost an evaluation may spend: that of one CRD
// validation rule, roughly 0.1 s of CPU.
const CostLimit = celconfig.PerCallLimit

// interruptEvery is how many comprehension iterations pass between checks
// of the context given to EvalContext.
const interruptEvery = 100

var (
	// ErrMissing: the expression reads a field that is not there (yet): no
	// such key or field, an index out of range, or null where a value is
	// needed. A goal treats it as "not yet" rather than as false.
	ErrMissing = errors.New("field not present")
	// ErrEval: the evaluation failed for another reason (a type error, a
	// division by zero, the cost limit, a cancelled context).
	ErrEval = errors.New("evaluation failed")
)

// missingPrefixes begin the messages of cel-go's runtime errors for a
// field that is not there; cel-go exports no type for them.
var missingPrefixes = []string{"no such key", "no such attribute", "no such field", "index out of bounds"}

// The environments are built once: building one takes milliseconds, and
// compiling against a shared one is safe.
var (
	objectEnv     = sync.OnceValues(func() (*cel.Env, error) { return newEnv("") })
	transitionEnv = sync.OnceValues(func() (*cel.Env, error) { return newEnv("oldObject") })
	acrossEnv     = sync.OnceValues(func() (*cel.Env, error) { return newEnv("objects") })
)

// newEnv builds the environment of Kubernetes CRD validation rules with
// object, and with another variable: oldObject for a transition rule,
// objects for a rule across objects; all dyn, as there is no schema to
// type them.
func newEnv(another string) (*cel.Env, error) {
	vars := []cel.EnvOption{cel.Variable("object", cel.DynType)}
	if another != "" {
		vars = append(vars, cel.Variable(another, cel.DynType))
	}
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(
		environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: vars},
	)
	if err != nil {
		return nil, err
	}
	return set.NewExpressionsEnv(), nil
}

// Expression is a compiled boolean CEL expression. It is safe for
// concurrent use.
type Expression struct {
	// Source is the expression as written.
	Source string

	transition bool
	across     bool
	ast        *cel.Ast
	program    cel.Program
	// loops: e has comprehensions, which a limit may have to end.
	loops bool
	// tracing evaluates again, recording every intermediate value, to find
	// out whether an error came from a null operand. Built on first need.
	tracing func() (cel.Program, error)
}

// CompileError says where an expression is wrong.
type CompileError struct {
	// Line and Column are 1-based within the source; Column counts
	// characters, not bytes.
	Line, Column int
	Message      string

	oneLine bool
}

func (e *CompileError) Error() string {
	if e.oneLine {
		return fmt.Sprintf("column %d: %s", e.Column, e.Message)
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// Compile compiles src, a CEL expression over object (and oldObject when
// transition) that evaluates to bool. A syntax error, an undeclared name
// and a result the checker knows is not bool (or dyn, checked at Eval) are
// *CompileError.
func Compile(src string, transition bool) (*Expression, error) {
	if transition {
		return cachedCompile("transition", src, func() (*Expression, error) {
			return compileExpr(src, transitionEnv, func(e *Expression) { e.transition = true })
		})
	}
	return cachedCompile("object", src, func() (*Expression, error) { return compileExpr(src, objectEnv, nil) })
}

// compiled holds the expressions compiled in this process, by environment
// and source: a scenario's rules are compiled for each of its runs, and an
// exploration runs one scenario's rules thousands of times. An Expression
// does not change once built and its program is safe for concurrent use
// (what an evaluation counts lives in its activation).
var compiled = bounded.Map[string, *Expression]{Limit: maxCompiled}

const maxCompiled = 4096

// cachedCompile is compile's expression for src in env, compiled once;
// a source that does not compile is compiled again each time.
func cachedCompile(env, src string, compile func() (*Expression, error)) (*Expression, error) {
	key := env + "\x00" + src
	if e, ok := compiled.Get(key); ok {
		return e, nil
	}
	e, err := compile()
	if err != nil {
		return nil, err
	}
	compiled.Put(key, e)
	return e, nil
}

// CompileAcross compiles src, a CEL expression over object and objects
// (the objects of each kind at the same instant, by kind: objects.WebApp
// is a list) that evaluates to bool. Evaluate it with EvalAcross.
func CompileAcross(src string) (*Expression, error) {
	return cachedCompile("across", src, func() (*Expression, error) {
		return compileExpr(src, acrossEnv, func(e *Expression) { e.across = true })
	})
}

func compileExpr(src string, envOf func() (*cel.Env, error), mark func(*Expression)) (*Expression, error) {
	oneLine := !strings.Contains(src, "\n")
	if strings.TrimSpace(src) == "" {
		return nil, &CompileError{Line: 1, Column: 1, Message: "empty expression", oneLine: oneLine}
	}
	if len(src) > MaxExpressionLength {
		return nil, &CompileError{Line: 1, Column: 1, Message: fmt.Sprintf("%d bytes long, more than %d", len(src), MaxExpressionLength), oneLine: oneLine}
	}
	env, err := envOf()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if errs := iss.Errors(); len(errs) > 0 {
		return nil, compileError(errs, oneLine)
	}
	if t := ast.OutputType(); t.Kind() != types.BoolKind && t.Kind() != types.DynKind {
		line, col := startOf(src)
		return nil, &CompileError{Line: line, Column: col, Message: fmt.Sprintf("must evaluate to bool, not %s", t), oneLine: oneLine}
	}
	opts := []cel.ProgramOption{cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery)}
	l := planLimits(env, ast)
	if l != nil {
		opts = append(opts, cel.CustomDecoratorV2(l.decorator()))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		line, col := startOf(src)
		return nil, &CompileError{Line: line, Column: col, Message: err.Error(), oneLine: oneLine}
	}
	e := &Expression{
		Source:  src,
		ast:     ast,
		program: prg,
		loops:   l != nil && len(l.ranges) > 0,
		tracing: sync.OnceValues(func() (cel.Program, error) {
			return env.Program(ast, slices.Concat(opts, []cel.ProgramOption{cel.EvalOptions(cel.OptTrackState)})...)
		}),
	}
	if mark != nil {
		mark(e)
	}
	return e, nil
}

// maxMessages bounds how many of cel-go's errors a CompileError lists.
const maxMessages = 5

// compileError turns cel-go's errors into one CompileError at the first,
// listing the others.
func compileError(errs []*cel.Error, oneLine bool) *CompileError {
	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b *cel.Error) int {
		return cmp.Or(cmp.Compare(a.Location.Line(), b.Location.Line()), cmp.Compare(a.Location.Column(), b.Location.Column()))
	})
	at := func(e *cel.Error) (int, int) {
		return max(e.Location.Line(), 1), max(e.Location.Column(), 0) + 1
	}
	first := errs[0]
	out := &CompileError{Message: first.Message, oneLine: oneLine}
	out.Line, out.Column = at(first)
	seen := map[string]bool{first.Message: true}
	n := 1
	for _, e := range errs[1:] {
		if seen[e.Message] {
			continue
		}
		seen[e.Message] = true
		if n == maxMessages {
			out.Message += "; ..."
			break
		}
		n++
		line, col := at(e)
		out.Message += "; " + (&CompileError{Line: line, Column: col, Message: e.Message, oneLine: oneLine}).Error()
	}
	return out
}

// startOf returns the line and column of the first character of src that
// is not a space.
func startOf(src string) (line, col int) {
	line, col = 1, 1
	for _, r := range src {
		switch r {
		case '\n':
			line, col = line+1, 1
		case ' ', '\t', '\r':
			col++
		default:
			return line, col
		}
	}
	return line, col
}

// Transition reports whether e is a transition rule (binds oldObject).
func (e *Expression) Transition() bool { return e.transition }

// Across reports whether e is a rule across objects (binds objects).
func (e *Expression) Across() bool { return e.across }

// EvalAcross evaluates a rule across objects over object and objects, a
// map from kind to a list of objects. Its errors are Eval's.
func (e *Expression) EvalAcross(object map[string]any, objects map[string]any) (bool, error) {
	if !e.across {
		return false, fmt.Errorf("%w: not a rule across objects", ErrEval)
	}
	return e.eval(context.Background(), &activation{object: object, objects: objects})
}

// Eval evaluates e over object and, for a transition rule, oldObject. An
// error wraps ErrMissing when a field e reads is not there (yet), including
// a missing oldObject and a null result, and ErrEval otherwise, including
// a result that is not bool.
func (e *Expression) Eval(object, oldObject map[string]any) (bool, error) {
	return e.EvalContext(context.Background(), object, oldObject)
}

// EvalContext is Eval, ended early (as ErrEval) when ctx is done.
func (e *Expression) EvalContext(ctx context.Context, object, oldObject map[string]any) (bool, error) {
	if e.transition && oldObject == nil {
		return false, fmt.Errorf("%w: no oldObject for a transition rule", ErrMissing)
	}
	if e.across {
		return false, fmt.Errorf("%w: a rule across objects: use EvalAcross", ErrEval)
	}
	return e.eval(ctx, &activation{object: object, oldObject: oldObject})
}

func (e *Expression) eval(ctx context.Context, vars *activation) (bool, error) {
	if e.loops {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		vars.usage.stop = cancel
	}
	out, _, err := e.program.ContextEval(ctx, vars)
	if vars.usage.err != nil {
		// Even when the result absorbed it (err || true): the limits
		// hold for every evaluation.
		return false, fmt.Errorf("%w: %w", ErrEval, vars.usage.err)
	}
	if err != nil {
		return false, e.evalError(vars, err)
	}
	if b, ok := out.Value().(bool); ok {
		return b, nil
	}
	if out.Type() == types.NullType {
		return false, fmt.Errorf("%w: result is null", ErrMissing)
	}
	return false, fmt.Errorf("%w: result is %s, not bool", ErrEval, out.Type().TypeName())
}

// evalError classifies an evaluation error as ErrMissing or ErrEval.
func (e *Expression) evalError(vars *activation, err error) error {
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return fmt.Errorf("%w: cost limit of %d exceeded", ErrEval, CostLimit)
	}
	var celErr *types.Err
	if errors.As(err, &celErr) {
		msg := celErr.Error()
		for _, p := range missingPrefixes {
			if strings.HasPrefix(msg, p) {
				return fmt.Errorf("%w: %w", ErrMissing, err)
			}
		}
		if strings.HasPrefix(msg, "no such overload") && e.nullOperand(vars, celErr.NodeID()) {
			return fmt.Errorf("%w: %w on null", ErrMissing, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrEval, err)
}

// nullOperand reports whether the call with the given id had a null
// operand, as in object.spec.paused > 1 with paused: null. cel-go's error
// does not say, so e runs again recording its intermediate values; only
// failing evaluations pay for it.
func (e *Expression) nullOperand(vars *activation, id int64) bool {
	prg, err := e.tracing()
	if err != nil {
		return false
	}
	_, det, _ := prg.Eval(&activation{object: vars.object, oldObject: vars.oldObject, objects: vars.objects})
	if det == nil || det.State() == nil {
		return false
	}
	nodes := celast.MatchDescendants(celast.NavigateAST(e.ast.NativeRep()), func(n celast.NavigableExpr) bool {
		return n.ID() == id
	})
	if len(nodes) == 0 || nodes[0].Kind() != celast.CallKind {
		return false
	}
	call := nodes[0].AsCall()
	operands := call.Args()
	if call.IsMemberFunction() {
		operands = append([]celast.Expr{call.Target()}, operands...)
	}
	for _, o := range operands {
		if v, ok := det.State().Value(o.ID()); ok && v.Type() == types.NullType {
			return true
		}
	}
	return false
}

// activation binds object and oldObject without building a map per
// evaluation.
type activation struct {
	object, oldObject, objects map[string]any
	usage                      usage
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "object":
		return a.object, true
	case "oldObject":
		return a.oldObject, true
	case "objects":
		return a.objects, true
	case usageName:
		return &a.usage, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
