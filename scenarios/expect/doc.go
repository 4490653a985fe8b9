// Package expect judges Kubernetes objects, held as unstructured maps (as
// decoded from JSON: map[string]any, []any, int64, float64, string, bool,
// nil), against what a scenario says they should look like. It has three
// parts:
//
//   - Expression: a boolean CEL expression over object (and oldObject, in
//     a transition rule), compiled with the CEL libraries of Kubernetes
//     CRD validation rules (quantity(), regex, lists, sets, url, ip, cidr,
//     format, semver), at the runtime cost limit of one validation rule
//     and limits of its own where cel-go's cost tracker falls short
//     (MaxRange, MaxStringBytesRead, MaxStringBytesBuilt). Eval tells "a
//     field is not there (yet)" (ErrMissing) apart from a failed
//     evaluation (ErrEval), so a goal can wait instead of failing.
//   - Match: partial-object matching in the kuttl and chainsaw sense,
//     except for lists (see below).
//   - Path, Field and Number: read one field for charts and messages.
//
// # Match semantics
//
// Expected is a partial object; Match returns every way actual differs
// from it (at most MaxMismatches, in path order).
//
//   - Maps: every key of expected must match the value at that key in
//     actual. Keys only in actual are ignored. A key missing from actual
//     is a mismatch with reason "missing".
//   - Lists: each expected element must match a distinct element of
//     actual, in any order; extra actual elements are ignored. Unlike
//     kuttl and chainsaw, which compare lists by length and order (a known
//     complaint, kuttl#76), so that a partial list of conditions or
//     containers can be asserted without knowing where the controller put
//     them. Elements are paired by a maximum bipartite matching, not
//     greedily: [{a: 1}, {a: 1, b: 2}] matches [{a: 1, b: 2}, {a: 1}].
//     An expected element left unpaired is reported at its own index,
//     not by its differences from some actual element: with no order
//     there is no element it was meant to be.
//   - null: an expected null matches a missing or null actual value, so
//     "this key must be absent" can be written.
//   - Numbers compare by value whatever their Go type (int, int64,
//     float64, json.Number, ...): 3 matches 3.0.
//   - Strings match when equal, or when both parse as resource.Quantity
//     and are equal: "1Gi" matches "1024Mi", "500m" matches "0.5". A
//     number and a string match only when the string is a quantity equal
//     to the number (1 matches "1"). Booleans match when equal.
//
// Paths in mismatches and in Field use dots for map keys, [i] for list
// indexes (of expected, in a mismatch), and ["..."] for keys that are not
// plain words: metadata.annotations["converge.dev/max-replicas"].
//
// # What it cannot do
//
// Expressions are compiled without a schema: object is dyn, so the
// checker rejects a non-boolean result only when it can tell the type. A
// typo in a field's name is found by CheckFields, given the kind's Schema
// (from a CRD's structural schema or a Go type): it follows selections,
// has(), constant indexes and the variables of macros over lists, and
// accepts what it cannot follow (computed values, keys of maps, preserved
// unknown fields). Without a schema a typo is found only at evaluation
// (as ErrMissing, "not yet").
// There is no static cost estimate (list sizes are unknown); runtime
// limits bound every evaluation instead, so an expression that is too
// expensive fails on a large object only. Those limits count work and
// bytes, never time, so a verdict does not depend on the machine. Match cannot say "this list
// has exactly these elements" or "in this order"; use an expression
// (size(), indexing) for that. Match and Field do not follow cycles: the
// values must be trees, as decoded JSON is.
package expect
