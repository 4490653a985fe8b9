package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed catalogue/*.yaml
var catalogueFS embed.FS

// Catalogue returns the built-in scenarios (catalogue/*.yaml), sorted by
// name.
func Catalogue() ([]*Scenario, error) {
	files, err := fs.Glob(catalogueFS, "catalogue/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*Scenario
	seen := map[string]string{}
	for _, f := range files {
		data, err := catalogueFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := Parse(path.Join("scenarios", f), data)
		if err != nil {
			return nil, err
		}
		if other, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("scenarios: %s and %s are both named %q", other, f, s.Name)
		}
		seen[s.Name] = f
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Lookup returns the catalogue's scenario named name.
func Lookup(name string) (*Scenario, error) {
	all, err := Catalogue()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("no scenario named %q in the catalogue (%v)", name, names)
}
