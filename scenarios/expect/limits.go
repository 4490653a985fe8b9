package expect

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// The cost limit alone bounds neither time nor memory with cel-go v0.29,
// whose cost tracker is built for expressions whose sizes were bounded
// by a schema before they ran. Eval adds limits of its own:
//
//   - The tracker spends time quadratic in the iterations of the loops in
//     progress (its bookkeeping stack grows by every iteration and is
//     scanned at each step): all() over 100,000 elements takes many
//     seconds within the cost limit. Comprehensions are charged by the
//     size of what they iterate over (MaxRange).
//   - It counts some linear work as constant (size() of a string, which
//     also copies it) and misses some calls altogether (object.a +
//     object.b on two strings costs nothing). Strings passed to calls are
//     charged by their size (MaxStringBytesRead).
//   - It does not count what some functions allocate: s.replace('x', s)
//     costs next to nothing, so a map() of it can build gigabytes. Strings
//     built are charged by their size (MaxStringBytesBuilt), and replace
//     and join are checked before they run.

// MaxRange bounds what one comprehension (all, exists, map, filter...)
// may iterate over, in elements. Comprehensions nested in others, or many
// in one expression, get less: the sum over comprehensions of n·(n+e),
// where n is the size of the range and e the sum of the sizes of those it
// runs in, is at most MaxRange² (about 0.2 s of CPU).
const MaxRange = 10_000

// MaxStringBytesRead bounds the bytes of the strings one evaluation passes
// to functions and operators.
const MaxStringBytesRead = 64 << 20

// MaxStringBytesBuilt bounds the bytes of the strings one evaluation
// builds.
const MaxStringBytesBuilt = 10 << 20

const maxRangeWork = MaxRange * MaxRange

// usageName is how the wrappers below find the evaluation's usage
// through cel-go's activations; CEL source cannot name it.
const usageName = "@converge.usage"

// usage is what one evaluation has spent.
type usage struct {
	// sizes holds the size of each comprehension's range, when last seen.
	sizes []int64
	// work is the sum of n·(n+e) described at MaxRange.
	work        int64
	read, built int64
	// err is the first limit the evaluation went over, and stop cancels
	// the evaluation's context so that its loops end (cel-go's
	// comprehensions go on after an error, looking for a value that
	// absorbs it).
	err  error
	stop func()
}

// fail returns the error a node yields when the evaluation goes over a
// limit, and ends the evaluation.
func (u *usage) fail(id int64, format string, args ...any) ref.Val {
	v := types.NewErrWithNodeID(id, format, args...)
	if u.err == nil {
		u.err = v.(*types.Err)
		if u.stop != nil {
			u.stop()
		}
	}
	return v
}

// role is what a watched node is charged for.
type role uint8

const (
	// roleRange: a comprehension iterates over the node's value.
	roleRange role = 1 << iota
	// roleOperand: the node's value is passed to a call.
	roleOperand
	// roleBuilds: the node is a call that may build a string.
	roleBuilds
)

// limits is what bounding the evaluation of one expression needs to know
// about its nodes.
type limits struct {
	roles map[int64]role
	// ranges maps the id of a comprehension's range to the
	// comprehension's index.
	ranges map[int64]int
	// enclosing lists, for each comprehension, those whose loop it runs in.
	enclosing [][]int
	// prechecked holds the implementations of the calls that can build a
	// string far larger than their operands (replace, join), run by their
	// wrapper once it has checked the size they would build.
	prechecked map[int64]*functions.Overload
}

// uncharged are the calls whose operands are not charged as read: they
// do not traverse them.
var uncharged = map[string]bool{
	operators.Index: true, operators.OptIndex: true, operators.OptSelect: true,
	operators.Conditional: true, operators.LogicalAnd: true, operators.LogicalOr: true,
	operators.LogicalNot: true, operators.NotStrictlyFalse: true,
}

// planLimits finds the nodes of ast to watch, or returns nil if there is
// none.
func planLimits(env *cel.Env, ast *cel.Ast) *limits {
	native := ast.NativeRep()
	root := celast.NavigateAST(native)
	l := &limits{roles: map[int64]role{}, ranges: map[int64]int{}, prechecked: map[int64]*functions.Overload{}}

	isComprehension := func(n celast.NavigableExpr) bool { return n.Kind() == celast.ComprehensionKind }
	comps := celast.MatchDescendants(root, isComprehension)
	index := make(map[int64]int, len(comps))
	for k, c := range comps {
		index[c.ID()] = k
	}
	l.enclosing = make([][]int, len(comps))
	for k, c := range comps {
		r := c.AsComprehension().IterRange()
		if r.Kind() == celast.ComprehensionKind {
			// A comprehension's node is a fold, which the cost tracker
			// needs unwrapped: watch the result of its loop instead, the
			// same value.
			r = r.AsComprehension().Result()
		}
		l.ranges[r.ID()] = k
		l.roles[r.ID()] |= roleRange
		child := celast.NavigableExpr(c)
		for p, ok := c.Parent(); ok; p, ok = p.Parent() {
			if p.Kind() == celast.ComprehensionKind {
				// The range and the initial accumulator are evaluated
				// before the loop, not in it.
				if pc := p.AsComprehension(); child.ID() != pc.IterRange().ID() && child.ID() != pc.AccuInit().ID() {
					l.enclosing[k] = append(l.enclosing[k], index[p.ID()])
				}
			}
			child = p
		}
	}

	mayBeString := func(id int64) bool {
		switch native.GetType(id).Kind() {
		case types.StringKind, types.BytesKind, types.DynKind, types.AnyKind:
			return true
		}
		return false
	}
	isCall := func(n celast.NavigableExpr) bool { return n.Kind() == celast.CallKind }
	for _, c := range celast.MatchDescendants(root, isCall) {
		call := c.AsCall()
		if !uncharged[call.FunctionName()] {
			operands := call.Args()
			if call.IsMemberFunction() {
				operands = append([]celast.Expr{call.Target()}, operands...)
			}
			for _, o := range operands {
				if mayBeString(o.ID()) {
					l.roles[o.ID()] |= roleOperand
				}
			}
		}
		if !mayBeString(c.ID()) {
			continue
		}
		l.roles[c.ID()] |= roleBuilds
		if ids := native.GetOverloadIDs(c.ID()); len(ids) == 1 && amplifying[ids[0]] {
			if impl := binding(env, call.FunctionName(), ids[0]); impl != nil {
				l.prechecked[c.ID()] = impl
			}
		}
	}
	if len(l.roles) == 0 {
		return nil
	}
	return l
}

// amplifying names the overloads whose result can be far larger than
// their operands, which predictedSize knows how to size.
var amplifying = map[string]bool{
	"string_replace_string_string":     true,
	"string_replace_string_string_int": true,
	"list_join":                        true,
	"list_join_string":                 true,
}

// binding returns the implementation of an overload of a function of env.
func binding(env *cel.Env, function, overload string) *functions.Overload {
	fn, ok := env.Functions()[function]
	if !ok {
		return nil
	}
	impls, err := fn.Bindings()
	if err != nil {
		return nil
	}
	for _, o := range impls {
		if o.Operator == overload {
			return o
		}
	}
	return nil
}

// predictedSize returns the size in bytes of the string an amplifying
// overload would build from args, if it can tell.
func predictedSize(overload string, args []ref.Val) (int64, bool) {
	switch overload {
	case "string_replace_string_string", "string_replace_string_string_int":
		s, ok1 := args[0].(types.String)
		old, ok2 := args[1].(types.String)
		repl, ok3 := args[2].(types.String)
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		n := int64(strings.Count(string(s), string(old)))
		if len(args) == 4 {
			if limit, ok := args[3].(types.Int); ok && limit >= 0 {
				n = min(n, int64(limit))
			}
		}
		return int64(len(s)) + n*(int64(len(repl))-int64(len(old))), true
	case "list_join", "list_join_string":
		list, ok := args[0].(traits.Lister)
		if !ok {
			return 0, false
		}
		var sep int64
		if len(args) == 2 {
			s, ok := args[1].(types.String)
			if !ok {
				return 0, false
			}
			sep = int64(len(s))
		}
		size, ok := list.Size().(types.Int)
		if !ok {
			return 0, false
		}
		total := max(int64(size)-1, 0) * sep
		for i := types.Int(0); i < size; i++ {
			if s, ok := list.Get(i).(types.String); ok {
				total += int64(len(s))
			}
		}
		return total, true
	}
	return 0, false
}

// decorator wraps the nodes limits watches. The wrappers keep the
// interface of the node they wrap (attribute, call, list): the cost
// tracker recognises nodes by it, and cel-go's optimizer folds only its
// own list type, so constant lists that are ranges are charged too.
// Comprehensions are left alone (see planLimits), and constants are
// bounded by the source's length.
func (l *limits) decorator() interpreter.InterpretableDecoratorV2 {
	return func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		r := l.roles[i.ID()]
		if r == 0 {
			return i, nil
		}
		// cel-go decorates an attribute again only when it extends it
		// for a selection or an index; the attributes watched here
		// (operands and ranges) are never selected from, so no node is
		// wrapped twice.
		switch n := i.(type) {
		case interpreter.InterpretableAttribute:
			return &limitedAttribute{n, l, r}, nil
		case interpreter.InterpretableCall:
			return &limitedCall{InterpretableCall: n, limits: l, role: r, impl: l.prechecked[i.ID()]}, nil
		case interpreter.InterpretableConstructor:
			return &limitedConstructor{n, l, r}, nil
		}
		return i, nil
	}
}

// charge records that node id, in role r, yielded v, and returns v, or an
// error when the evaluation goes over a limit.
func (l *limits) charge(vars interpreter.Activation, id int64, r role, v ref.Val) ref.Val {
	var n int64
	switch x := v.(type) {
	case types.String:
		n = int64(len(x))
	case types.Bytes:
		n = int64(len(x))
	case traits.Sizer:
		if r&roleRange == 0 {
			return v
		}
		size, ok := x.Size().(types.Int)
		if !ok {
			return v
		}
		if u := usageOf(vars); u != nil {
			return u.chargeRange(l, id, int64(size), v)
		}
		return v
	default:
		return v
	}
	u := usageOf(vars)
	if u == nil {
		return v
	}
	if r&roleBuilds != 0 {
		if u.built += n; u.built > MaxStringBytesBuilt {
			return u.fail(id, "strings built exceed %d bytes", MaxStringBytesBuilt)
		}
	}
	if r&roleOperand != 0 {
		if u.read += n; u.read > MaxStringBytesRead {
			return u.fail(id, "strings read exceed %d bytes", MaxStringBytesRead)
		}
	}
	return v
}

func (u *usage) chargeRange(l *limits, id, n int64, v ref.Val) ref.Val {
	k, ok := l.ranges[id]
	if !ok {
		return v
	}
	if u.sizes == nil {
		u.sizes = make([]int64, len(l.enclosing))
	}
	u.sizes[k] = n
	var e int64
	for _, j := range l.enclosing[k] {
		e += u.sizes[j]
	}
	if u.work += n * (n + e); u.work <= maxRangeWork {
		return v
	}
	switch {
	case n > MaxRange:
		return u.fail(id, "comprehension over %d elements, more than %d", n, MaxRange)
	case e > 0:
		return u.fail(id, "comprehension over %d elements inside loops over %d: too much iteration", n, e)
	}
	return u.fail(id, "comprehension over %d elements: too much iteration in one evaluation", n)
}

// over returns an error if the evaluation has already gone over a string
// limit: a map() would otherwise go on building strings it throws away.
func (u *usage) over(id int64) ref.Val {
	switch {
	case u.built > MaxStringBytesBuilt:
		return u.fail(id, "strings built exceed %d bytes", MaxStringBytesBuilt)
	case u.read > MaxStringBytesRead:
		return u.fail(id, "strings read exceed %d bytes", MaxStringBytesRead)
	}
	return nil
}

// usageOf finds the evaluation's usage, or nil outside Eval (as when
// cel-go folds a constant while planning).
func usageOf(vars interpreter.Activation) *usage {
	if u, ok := vars.ResolveName(usageName); ok {
		return u.(*usage)
	}
	return nil
}

type limitedAttribute struct {
	interpreter.InterpretableAttribute
	limits *limits
	role   role
}

func (a *limitedAttribute) Exec(f *interpreter.ExecutionFrame) ref.Val {
	return a.limits.charge(f, a.ID(), a.role, a.InterpretableAttribute.Exec(f))
}

func (a *limitedAttribute) Eval(vars interpreter.Activation) ref.Val {
	return a.limits.charge(vars, a.ID(), a.role, a.InterpretableAttribute.Eval(vars))
}

type limitedConstructor struct {
	interpreter.InterpretableConstructor
	limits *limits
	role   role
}

func (c *limitedConstructor) Exec(f *interpreter.ExecutionFrame) ref.Val {
	return c.limits.charge(f, c.ID(), c.role, c.InterpretableConstructor.Exec(f))
}

func (c *limitedConstructor) Eval(vars interpreter.Activation) ref.Val {
	return c.limits.charge(vars, c.ID(), c.role, c.InterpretableConstructor.Eval(vars))
}

type limitedCall struct {
	interpreter.InterpretableCall
	limits *limits
	role   role
	// impl, when set, is run here rather than by the wrapped call, once
	// the size of its result is known to fit.
	impl *functions.Overload
}

func (c *limitedCall) Exec(f *interpreter.ExecutionFrame) ref.Val {
	if c.role&roleBuilds != 0 {
		if u := usageOf(f); u != nil {
			if err := u.over(c.ID()); err != nil {
				return err
			}
		}
	}
	if c.impl == nil {
		return c.limits.charge(f, c.ID(), c.role, c.InterpretableCall.Exec(f))
	}
	args := c.Args()
	vals := make([]ref.Val, len(args))
	for i, a := range args {
		vals[i] = a.Exec(f)
	}
	// Strict, like cel-go's calls: the first error or unknown operand is
	// the result.
	for _, v := range vals {
		if types.IsUnknownOrError(v) {
			return v
		}
	}
	if size, ok := predictedSize(c.impl.Operator, vals); ok {
		if u := usageOf(f); u != nil && u.built+size > MaxStringBytesBuilt {
			return u.fail(c.ID(), "%s would build a string of %d bytes, more than %d", c.Function(), size, MaxStringBytesBuilt-u.built)
		}
	}
	if t := c.impl.OperandTrait; t != 0 && !vals[0].Type().HasTrait(t) {
		return types.NoSuchOverloadErr()
	}
	var out ref.Val
	switch {
	case len(vals) == 1 && c.impl.Unary != nil:
		out = c.impl.Unary(vals[0])
	case len(vals) == 2 && c.impl.Binary != nil:
		out = c.impl.Binary(vals[0], vals[1])
	case c.impl.Function != nil:
		out = c.impl.Function(vals...)
	default:
		return types.NoSuchOverloadErr()
	}
	return c.limits.charge(f, c.ID(), c.role, out)
}

func (c *limitedCall) Eval(vars interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(vars))
}
