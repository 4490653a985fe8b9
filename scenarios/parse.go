package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/reports"
)

// Load reads and parses a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads a scenario from YAML, strictly: an unknown field, a value of
// the wrong type, a bad duration or an invalid setting is an error naming
// the file, the line and the field. All of them are reported at once.
func Parse(file string, data []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty scenario", file)
	}
	doc := root.Content[0]
	var errs []error
	checkNode(doc, reflect.TypeFor[Scenario](), "", func(n *yaml.Node, path, msg string) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %s", file, n.Line, path, msg))
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	raw, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := s.Validate(); err != nil {
		var out []error
		for _, e := range unjoin(err) {
			var fe fieldError
			if errors.As(e, &fe) {
				out = append(out, fmt.Errorf("%s:%d: %s", file, locate(doc, fe.path), fe))
				continue
			}
			out = append(out, fmt.Errorf("%s: %w", file, e))
		}
		return nil, errors.Join(out...)
	}
	return &s, nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var (
	durationType       = reflect.TypeFor[time.Duration]()
	reportDurationType = reflect.TypeFor[reports.Duration]()
)

// checkNode checks n against Go type t by its JSON field names, reporting
// unknown fields and scalars that do not parse as t.
func checkNode(n *yaml.Node, t reflect.Type, path string, bad func(n *yaml.Node, path, msg string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	switch {
	case t == durationType || t == reportDurationType:
		if n.Kind != yaml.ScalarNode {
			bad(n, path, "a duration is a string like \"30s\"")
			return
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			if _, intErr := strconv.ParseInt(n.Value, 10, 64); intErr != nil || t == reportDurationType {
				bad(n, path, fmt.Sprintf("%q is not a duration like \"30s\"", n.Value))
			}
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad(n, path, "expected a mapping of fields")
			return
		}
		fields := jsonFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if seen[k.Value] {
				bad(k, p, "given twice")
			}
			seen[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				bad(k, p, fmt.Sprintf("unknown field (known: %s)", strings.Join(sortedKeys(fields), ", ")))
				continue
			}
			checkNode(v, ft, p, bad)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad(n, path, "expected a list")
			return
		}
		for i, c := range n.Content {
			checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), bad)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad(n, path, "expected a mapping")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), bad)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			bad(n, path, "expected a string")
		}
	case reflect.Bool:
		if _, err := strconv.ParseBool(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			bad(n, path, "expected true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(n.Value, 10, t.Bits()); n.Kind != yaml.ScalarNode || err != nil {
			bad(n, path, fmt.Sprintf("expected a whole number (%d bits), got %q", t.Bits(), n.Value))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(n.Value, 10, t.Bits()); n.Kind != yaml.ScalarNode || err != nil {
			bad(n, path, fmt.Sprintf("expected a whole number >= 0, got %q", n.Value))
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(n.Value, 64); n.Kind != yaml.ScalarNode || err != nil {
			bad(n, path, fmt.Sprintf("expected a number, got %q", n.Value))
		}
	}
}

// jsonFields maps the JSON names of t's fields to their types, through
// embedded structs.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// locate returns the line of the node at path ("workload.replicas",
// "faults[2]"), or of the deepest node on the way that exists.
func locate(doc *yaml.Node, path string) int {
	n := doc
	for _, part := range strings.Split(path, ".") {
		name, index, hasIndex := strings.Cut(part, "[")
		if next := field(n, name); next != nil {
			n = next
		} else {
			return n.Line
		}
		if hasIndex {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return n.Line
			}
			n = n.Content[i]
		}
	}
	return n.Line
}

func field(n *yaml.Node, name string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i+1]
		}
	}
	return nil
}
