// Package kubebuilder reads an operator project laid out by kubebuilder or
// operator-sdk (which scaffolds the same layout) and writes converge's first
// test for it: what `converge init` does.
//
// It reads, and needs nothing else: the PROJECT file (the module path, the
// layout, the API resources), the controllers' package (internal/controller,
// or controllers in the go/v3 layout, one folder per group in a multigroup
// project) with the reconcilers it declares, config/rbac (the
// ServiceAccount the manager runs as), config/crd (each kind's schema) and
// config/samples (one object per kind). It writes, in each controllers'
// package, converge_test.go (TestMain and TestScenarios: a
// scenarios.Manager wired to each reconciler's SetupWithManager, the
// project's API types in its scheme, its RBAC as the identity) and one
// starter scenario per kind under testdata/converge, each a starting point
// to edit.
//
// It cannot wire a reconciler whose fields hold something other than what
// the manager gives (the client, the scheme, an event recorder) unless
// cmd/main.go builds it from the manager alone; such a field is left zero
// and named in the file. It writes no file that exists.
package kubebuilder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/userfile"
)

// ProjectFile is the file kubebuilder and operator-sdk write at a project's
// root.
const ProjectFile = "PROJECT"

// ErrNoProject: no PROJECT file in the folder or above it.
var ErrNoProject = errors.New("no kubebuilder or operator-sdk project")

// Project is what the PROJECT file and go.mod say.
type Project struct {
	// Root is the folder holding PROJECT.
	Root string
	// Module is go.mod's module path.
	Module string
	// Name is PROJECT's projectName.
	Name       string
	Layout     []string
	MultiGroup bool
	Resources  []Resource
}

// Resource is one of PROJECT's resources.
type Resource struct {
	Group, Version, Kind, Domain string
	// Path is the import path of its Go types; empty for a kind the
	// project does not define (a core type it only controls).
	Path       string
	Controller bool
}

// projectFile is PROJECT as kubebuilder v4 writes it (version "3").
type projectFile struct {
	Version     string   `json:"version"`
	Domain      string   `json:"domain"`
	Layout      []string `json:"layout"`
	MultiGroup  bool     `json:"multigroup"`
	ProjectName string   `json:"projectName"`
	Repo        string   `json:"repo"`
	Resources   []struct {
		API *struct {
			CRDVersion string `json:"crdVersion"`
			Namespaced bool   `json:"namespaced"`
		} `json:"api"`
		Controller bool   `json:"controller"`
		Domain     string `json:"domain"`
		Group      string `json:"group"`
		Kind       string `json:"kind"`
		Path       string `json:"path"`
		Version    string `json:"version"`
	} `json:"resources"`
}

// Find returns the folder holding PROJECT: dir or the nearest folder above
// it, up to the module's root (the folder holding go.mod).
func Find(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var looked []string
	for d := abs; ; d = filepath.Dir(d) {
		looked = append(looked, d)
		if isFile(filepath.Join(d, ProjectFile)) {
			return d, nil
		}
		if isFile(filepath.Join(d, "go.mod")) || filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("%w: no %s file in %s", ErrNoProject, ProjectFile, strings.Join(looked, ", "))
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}

// maxFile bounds each file Read reads: PROJECT, go.mod, Go sources.
const maxFile = 4 << 20

func readFile(p string) ([]byte, error) { return userfile.ReadFile(p, maxFile) }

// ReadProject reads the PROJECT file and go.mod of the project at root.
func ReadProject(root string) (*Project, error) {
	raw, err := readFile(filepath.Join(root, ProjectFile))
	if err != nil {
		return nil, err
	}
	var pf projectFile
	if err := yaml.Unmarshal(raw, &pf); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(root, ProjectFile), err)
	}
	if !slices.ContainsFunc(pf.Layout, func(l string) bool { return strings.HasPrefix(l, "go.kubebuilder.io/") }) {
		return nil, fmt.Errorf("%s: layout %v: converge init knows the Go layouts (go.kubebuilder.io/v3 and v4), which operator-sdk's Go projects use too", filepath.Join(root, ProjectFile), pf.Layout)
	}
	gomod, err := readFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("the project's go.mod: %w", err)
	}
	mf, err := modfile.ParseLax(filepath.Join(root, "go.mod"), gomod, nil)
	if err != nil {
		return nil, err
	}
	if mf.Module == nil {
		return nil, fmt.Errorf("%s names no module", filepath.Join(root, "go.mod"))
	}
	p := &Project{Root: root, Module: mf.Module.Mod.Path, Name: pf.ProjectName, Layout: pf.Layout, MultiGroup: pf.MultiGroup}
	for _, r := range pf.Resources {
		if r.Kind == "" || r.Version == "" {
			continue
		}
		p.Resources = append(p.Resources, Resource{Group: r.Group, Version: r.Version, Kind: r.Kind, Domain: r.Domain, Path: r.Path, Controller: r.Controller})
	}
	return p, nil
}

// v3 is the go/v3 layout: controllers/ and api/ at the root.
func (p *Project) v3() bool {
	return slices.Contains(p.Layout, "go.kubebuilder.io/v3")
}

// controllerDirs are the folders, relative to Root, that may hold
// reconcilers, as the layout places them.
func (p *Project) controllerDirs() []string {
	base := filepath.Join("internal", "controller")
	if p.v3() {
		base = "controllers"
	}
	dirs := []string{base}
	if p.MultiGroup {
		entries, _ := os.ReadDir(filepath.Join(p.Root, base))
		for _, e := range entries {
			if e.IsDir() && e.Name() != "testdata" {
				dirs = append(dirs, filepath.Join(base, e.Name()))
			}
		}
	}
	return dirs
}

// configDir is a folder of config/, relative to Root, if it exists.
func (p *Project) configDir(name string) (string, bool) {
	rel := filepath.Join("config", name)
	info, err := os.Stat(filepath.Join(p.Root, rel))
	return rel, err == nil && info.IsDir()
}
