package scaler

import (
	"embed"
	"fmt"

	"github.com/converge-lab/converge/scenarios"
)

//go:embed catalogue/*.yaml
var catalogueFS embed.FS

// Catalogue returns the scaler's scenarios (catalogue/*.yaml), sorted by
// name.
func Catalogue() ([]*scenarios.Scenario, error) {
	return scenarios.LoadFS(catalogueFS, "catalogue")
}

// Lookup returns the catalogue's scenario named name.
func Lookup(name string) (*scenarios.Scenario, error) {
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
	return nil, fmt.Errorf("no scenario named %q in the scaler's catalogue (%v)", name, names)
}
