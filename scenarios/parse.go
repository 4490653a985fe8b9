package scenarios

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/reports"
)

// Limits on a scenario file, so that no file, however written, makes the
// parser take unbounded time or memory.
const (
	// MaxFileSize is the largest scenario file read.
	MaxFileSize = 1 << 20
	// maxNodes bounds the YAML nodes visited, aliases expanded: a file of a
	// few kilobytes can otherwise fan out to millions of nodes.
	maxNodes = 100_000
	// maxErrors is how many mistakes are listed; the rest are counted.
	maxErrors = 50
)

// Load reads and parses a scenario file; the object files it names are
// read relative to its folder.
func Load(file string) (*Scenario, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	return ParseFS(rootFS, strings.TrimPrefix(filepath.ToSlash(abs), "/"), file)
}

// rootFS reads object files named relative to a scenario file anywhere on
// the file system, ../ included; only regular files and folders, so that a
// pipe or a device named there is refused rather than waited on.
var rootFS = userfile.FS("/")

// ParseFS reads and parses the scenario file name of fsys: object files are
// read from fsys, relative to name's folder. Errors name the file as shown
// (name when shown is empty).
func ParseFS(fsys fs.FS, name, shown string) (*Scenario, error) {
	shown = cmp.Or(shown, name)
	// Checked before it is opened: an open of a pipe waits for a writer.
	// (rootFS also refuses one swapped in after the check.)
	st, err := fs.Stat(fsys, name)
	if err == nil {
		err = userfile.Regular(shown, st.Mode())
	}
	if e := new(userfile.NotRegularError); errors.As(err, &e) {
		return nil, &userfile.NotRegularError{Name: shown, Kind: e.Kind}
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	defer f.Close()
	// One byte past the limit is enough to refuse it.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	return parse(shown, data, fsys, path.Dir(name))
}

// LoadFS reads every scenario file (*.yaml) of the folder dir of fsys,
// sorted by name. Two scenarios of one name are an error; so is a folder
// without any.
func LoadFS(fsys fs.FS, dir string) ([]*Scenario, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no scenario files (*.yaml)", dir)
	}
	var out []*Scenario
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		shown := ""
		if fsys == rootFS { // its names are absolute paths without the "/"
			shown = "/" + f
		}
		s, err := ParseFS(fsys, f, shown)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := seen[s.Name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both named %q", other, f, s.Name))
			continue
		}
		seen[s.Name] = f
		out = append(out, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Scenario) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// LoadDir is LoadFS on a folder of the file system.
func LoadDir(dir string) ([]*Scenario, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return LoadFS(rootFS, strings.TrimPrefix(filepath.ToSlash(abs), "/"))
}

// Parse reads a scenario from YAML (or JSON), strictly: an unknown field, a
// value of the wrong type, a bad duration, an invalid setting or an
// expression that does not compile is an error naming the file, the line
// and the field. All of them are reported at once. A file holds one
// scenario: a second YAML document is an error. Strings are read as
// written (name: no is the string "no"), durations only as strings with a
// unit ("2s"; a bare 2 is refused, 0 aside). Object files are read
// relative to file's folder.
func Parse(file string, data []byte) (*Scenario, error) {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	return parse(file, data, rootFS, strings.TrimPrefix(filepath.ToSlash(dir), "/"))
}

// parse reads a scenario whose object files are read from files, relative
// to dir.
func parse(file string, data []byte, files fs.FS, dir string) (*Scenario, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d KiB: a scenario file is a page of YAML", file, MaxFileSize>>10)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty scenario", file)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty scenario", file)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		line := second.Line
		if err != nil {
			return nil, fmt.Errorf("%s: after the first document: %w", file, err)
		}
		return nil, fmt.Errorf("%s:%d: a scenario file holds one scenario; this is a second YAML document", file, line)
	}
	doc := root.Content[0]
	d := &decoder{file: file}
	value := d.node(doc, reflect.TypeFor[Scenario](), "")
	if err := d.err(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var s Scenario
	jd := json.NewDecoder(bytes.NewReader(raw))
	jd.DisallowUnknownFields()
	if err := jd.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", file, doc.Line, err)
	}
	errs := readObjectFiles(&s, files, dir)
	if err := s.Validate(); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	if len(errs) > 0 {
		var out []error
		for _, e := range errs {
			var ve valueError
			if errors.As(e, &ve) {
				if n, found := locateNode(doc, ve.path); found {
					line, col := valuePosition(data, n, ve.line, ve.col)
					out = append(out, fmt.Errorf("%s:%d:%d: %s", file, line, col, ve.msg))
					continue
				}
				out = append(out, fmt.Errorf("%s:%d: %s", file, locate(doc, ve.path), ve))
				continue
			}
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

// decoder turns YAML nodes into JSON values guided by the Go type they
// will be decoded into, collecting every mistake with its line.
type decoder struct {
	file    string
	visited int
	errs    []error
	more    int
	tooBig  bool
}

func (d *decoder) bad(n *yaml.Node, path, msg string) {
	if len(d.errs) >= maxErrors {
		d.more++
		return
	}
	d.errs = append(d.errs, fmt.Errorf("%s:%d: %s: %s", d.file, n.Line, path, msg))
}

func (d *decoder) err() error {
	errs := d.errs
	if d.more > 0 {
		errs = append(errs, fmt.Errorf("%s: and %d more mistakes", d.file, d.more))
	}
	return errors.Join(errs...)
}

// node returns n as a JSON value for type t, or nil where n is wrong (and
// reported) or null.
func (d *decoder) node(n *yaml.Node, t reflect.Type, path string) any {
	if d.tooBig {
		return nil
	}
	if d.visited++; d.visited > maxNodes {
		d.tooBig = true
		d.bad(n, path, fmt.Sprintf("the file expands to more than %d values (aliases included): a scenario is smaller", maxNodes))
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if t == durationType || t == reportDurationType {
		if n.Kind != yaml.ScalarNode {
			d.bad(n, path, "a duration is a string like \"30s\"")
			return nil
		}
		if n.Value == "0" {
			return "0s"
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			if _, intErr := strconv.ParseFloat(n.Value, 64); intErr == nil {
				d.bad(n, path, fmt.Sprintf("%s has no unit: write a duration like \"%ss\"", n.Value, n.Value))
			} else {
				d.bad(n, path, fmt.Sprintf("%q is not a duration like \"30s\"", n.Value))
			}
			return nil
		}
		return v.String()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.bad(n, path, "expected a mapping of fields")
			return nil
		}
		fields := jsonFields(t)
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if _, seen := out[k.Value]; seen {
				d.bad(k, p, "given twice")
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				d.bad(k, p, fmt.Sprintf("unknown field (known: %s)", strings.Join(sortedKeys(fields), ", ")))
				continue
			}
			out[k.Value] = d.node(v, ft, p)
		}
		return out
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.bad(n, path, "expected a list")
			return nil
		}
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, d.node(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)))
		}
		return out
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.bad(n, path, "expected a mapping")
			return nil
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				d.bad(k, path, "a key is a plain string")
				continue
			}
			p := join(path, k.Value)
			if _, seen := out[k.Value]; seen {
				d.bad(k, p, "given twice")
				continue
			}
			out[k.Value] = d.node(n.Content[i+1], t.Elem(), p)
		}
		return out
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.bad(n, path, "expected a string")
			return nil
		}
		// As written: a YAML 1.1 reader would turn "no" into false.
		return n.Value
	case reflect.Bool:
		v, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil || (n.Value != "true" && n.Value != "false") {
			d.bad(n, path, "expected true or false")
			return nil
		}
		return v
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v, err := strconv.ParseInt(n.Value, 10, t.Bits())
		if n.Kind != yaml.ScalarNode || err != nil {
			d.bad(n, path, fmt.Sprintf("expected a whole number (%d bits), got %q", t.Bits(), n.Value))
			return nil
		}
		return v
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, err := strconv.ParseUint(n.Value, 10, t.Bits())
		if n.Kind != yaml.ScalarNode || err != nil {
			d.bad(n, path, fmt.Sprintf("expected a whole number >= 0, got %q", n.Value))
			return nil
		}
		return v
	case reflect.Float32, reflect.Float64:
		v, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			d.bad(n, path, fmt.Sprintf("expected a finite number, got %q", n.Value))
			return nil
		}
		return v
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			d.bad(n, path, err.Error())
			return nil
		}
		return v
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
	n, _ := locateNode(doc, path)
	return n.Line
}

// locateNode returns the node at path, and whether it exists; else the
// deepest node on the way that does.
func locateNode(doc *yaml.Node, path string) (*yaml.Node, bool) {
	n := doc
	for _, part := range strings.Split(path, ".") {
		name, index, hasIndex := strings.Cut(part, "[")
		if next := field(n, name); next != nil {
			n = next
		} else {
			return n, false
		}
		if hasIndex {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return n, false
			}
			n = n.Content[i]
		}
	}
	return n, true
}

func field(n *yaml.Node, name string) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}
