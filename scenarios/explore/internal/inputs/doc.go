// Package inputs draws changes to a custom resource's desired state from
// its CRD's structural schema, for exploring the inputs a controller is
// given rather than the faults it meets: a field changed after creation, a
// scale down, an optional field removed, a list shortened (after Acto,
// "Automatic End-to-End Testing for Operation Correctness of Cloud System
// Management", SOSP 2023). Everything here is a pure function of its
// arguments: no I/O, no randomness, the same output for the same input.
//
// Changes walks an object's subtree, normally spec, along its schema and
// draws at each value:
//   - an integer or a number: its minimum and maximum, zero, one more and
//     one less, each within the bounds (exclusive ones respected; an
//     exclusive bound of a number is not drawn, having no nearest value);
//     a whole multipleOf is an integer's step. With no maximum, twice its
//     magnitude plus one, and never a huge number.
//   - a string: the other enum values; else one other value, the current
//     one with a suffix or its last character changed, kept only when it
//     fits the lengths and the pattern; and the empty string when it fits.
//     A string with a format, or a pattern Go cannot compile, is left alone
//     but for its enum.
//   - a boolean: flipped.
//   - a field the schema does not require: removed. One the object lacks:
//     added with its default, or else its minimal value (zero, false, the
//     shortest string that fits, an empty list, an object of its required
//     fields) when one can be built.
//   - a list: an item added (a copy of the last, with a key changed to be
//     unique in a list-type=map and a value of its own in a set; a minimal
//     item in an empty list), the last and the first item removed, and the
//     list reversed.
//   - a map (additionalProperties): a key "converge-added" added with a
//     copy of the first entry's value, or a minimal one, and entries
//     removed.
//   - an int-or-string: a number's changes when it holds a number, a
//     string's when it holds a string.
//
// Changes also draws values the schema refuses, to be returned apart: one
// above the maximum and one below the minimum, a string outside the enum,
// too long, too short or not matching the pattern, a required field
// removed, and whatever else validation refuses (an item added past
// maxItems). Rules pin paths, exclude them, or add values to try.
//
// Each change is applied to a copy of the object and judged by the
// caller's validate, or by a Validator: the API server's own OpenAPI,
// list-type and CEL checks of the changed object as an update of the one
// the changes were drawn from, so that a transition rule such as
// self == oldSelf refuses a change to an immutable field.
//
// Numbers are as an unstructured object holds them: int64 when whole,
// float64 otherwise.
//
// # Caps
//
// Work is bounded whatever the input: Changes descends at most 16 levels
// below the root; into the first 3 and the last item of a list, and the
// first 3 and the last entry of a map in key order (the entries it may
// remove); draws at most 1000 changes and returns at most 10 refused ones;
// and draws strings to break a length limit only up to 4096 characters.
// Chains applies at most 10000 changes while searching.
//
// # Limits
//
//   - Nothing is drawn inside x-kubernetes-preserve-unknown-fields or an
//     embedded resource (they may be removed whole), nor at a value whose
//     type is not its schema's; a null is left alone.
//   - Changes draws no value to satisfy a rule across fields: a change that
//     a CEL rule refuses is refused, no more.
//   - A pattern is honoured only by editing the current value; a string
//     whose edits all miss it gets no other value.
//   - The Validator judges the object as written: the server would prune
//     unknown fields and apply defaults first (a removed field with a
//     default comes back), and it also checks metadata and the scale
//     subresource's paths, which the Validator does not.
//   - anyOf, oneOf, allOf and not are left to validation: Changes draws
//     from the structural part of the schema only.
package inputs
