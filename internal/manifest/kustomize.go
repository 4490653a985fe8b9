package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/userfile"
)

// MaxReads bounds the files one build reads, a file read again counted
// again: a kustomization whose bases include each other's bases twice
// over would otherwise grow without bound.
const MaxReads = 1000

// Build is what `kustomize build dir` prints, as documents: dir's
// kustomization built from fsys, with kustomize's defaults (files under the
// kustomization's root only, the order the kustomization gives, no
// plugins).
//
// Remote bases and files, Helm charts and plugins are refused with an
// error naming the kustomization file and the entry.
func Build(fsys fs.FS, dir string, limit Limits) ([]Doc, error) {
	kfs := &kustomizeFS{fsys: fsys, limit: limit}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(kfs, "/"+path.Clean(dir))
	if err != nil {
		if kfs.err != nil { // a refusal of ours, which kustomize wraps
			return nil, kfs.err
		}
		return nil, fmt.Errorf("%s: kustomize build: %w", Name(fsys, dir), err)
	}
	source := Name(fsys, dir) + " (kustomize build)"
	var out []Doc
	for i, r := range m.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: kustomize build: object %d: %w", Name(fsys, dir), i+1, err)
		}
		out = append(out, Doc{Source: source, N: i + 1, Raw: raw})
	}
	return out, nil
}

// kustomizeFS is fsys as kustomize's file system, read only: kustomize's
// absolute paths are fsys's paths below "/". Each kustomization read is
// checked for what would reach outside fsys.
type kustomizeFS struct {
	fsys fs.FS

	limit Limits

	mu    sync.Mutex
	total int64 // bytes read
	reads int
	err   error // the first refusal
}

var _ filesys.FileSystem = (*kustomizeFS)(nil)

var errReadOnly = errors.New("converge reads manifests and writes nothing")

// rel is kustomize's path p as a path of fsys.
func rel(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(p)), "/")
	if p == "" {
		return "."
	}
	return p
}

func (k *kustomizeFS) fail(err error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
	return err
}

func (k *kustomizeFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (k *kustomizeFS) Mkdir(string) error                  { return errReadOnly }
func (k *kustomizeFS) MkdirAll(string) error               { return errReadOnly }
func (k *kustomizeFS) RemoveAll(string) error              { return errReadOnly }
func (k *kustomizeFS) WriteFile(string, []byte) error      { return errReadOnly }

// Open is used by kustomize for nothing it builds here; a file opened is
// read in full, within the limit.
func (k *kustomizeFS) Open(p string) (filesys.File, error) {
	data, err := k.ReadFile(p)
	if err != nil {
		return nil, err
	}
	info, err := fs.Stat(k.fsys, rel(p))
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: strings.NewReader(string(data)), info: info}, nil
}

func (k *kustomizeFS) IsDir(p string) bool {
	info, err := fs.Stat(k.fsys, rel(p))
	return err == nil && info.IsDir()
}

func (k *kustomizeFS) Exists(p string) bool {
	_, err := fs.Stat(k.fsys, rel(p))
	return err == nil
}

func (k *kustomizeFS) ReadDir(p string) ([]string, error) {
	entries, err := fs.ReadDir(k.fsys, rel(p))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// CleanedAbs splits p into its folder and its file name ("" when p is a
// folder), as kustomize's own does after following links (fsys follows
// them when it reads).
func (k *kustomizeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r := rel(p)
	info, err := fs.Stat(k.fsys, r)
	if err != nil {
		return "", "", err
	}
	if info.IsDir() {
		return filesys.ConfirmedDir("/" + strings.TrimPrefix(r, ".")), "", nil
	}
	dir := path.Dir(r)
	if dir == "." {
		return "/", path.Base(r), nil
	}
	return filesys.ConfirmedDir("/" + dir), path.Base(r), nil
}

func (k *kustomizeFS) Glob(pattern string) ([]string, error) {
	matches, err := fs.Glob(k.fsys, rel(pattern))
	if err != nil {
		return nil, err
	}
	for i, m := range matches {
		matches[i] = "/" + m
	}
	return filesys.RemoveHiddenFiles(matches), nil
}

func (k *kustomizeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	return fs.WalkDir(k.fsys, rel(p), func(name string, d fs.DirEntry, err error) error {
		var info fs.FileInfo
		if err == nil {
			info, err = d.Info()
		}
		return walkFn("/"+strings.TrimPrefix(name, "."), info, err)
	})
}

// ReadFile reads p within what is left of the limit; a kustomization file
// is checked before kustomize reads it.
func (k *kustomizeFS) ReadFile(p string) ([]byte, error) {
	k.mu.Lock()
	k.reads++
	reads, left := k.reads, k.limit.file(k.total)
	k.mu.Unlock()
	name := rel(p)
	if reads > MaxReads {
		return nil, k.fail(fmt.Errorf("%s: kustomize build read more than %d files: do its bases include each other?", Name(k.fsys, name), MaxReads))
	}
	data, err := ReadFile(k.fsys, name, left)
	if err != nil {
		if tl := new(userfile.TooLargeError); errors.As(err, &tl) {
			return nil, k.fail(err)
		}
		return nil, err
	}
	k.mu.Lock()
	k.total += int64(len(data))
	k.mu.Unlock()
	for _, n := range kustomizationNames {
		if path.Base(name) == n {
			if err := k.checkLocal(name, data); err != nil {
				return nil, k.fail(err)
			}
		}
	}
	return data, nil
}

// checkLocal refuses a kustomization that names anything but files and
// folders of fsys: a remote base or file (kustomize would clone or fetch
// it), a Helm chart or a plugin (it would run a program).
func (k *kustomizeFS) checkLocal(name string, data []byte) error {
	var kust types.Kustomization
	if err := yaml.Unmarshal(data, &kust); err != nil {
		return nil // kustomize says what is wrong with it
	}
	refuse := func(field, entry, why string) error {
		return fmt.Errorf("%s: %s %q: %s; converge builds a kustomization from local files only", Name(k.fsys, name), field, entry, why)
	}
	dir := path.Dir(name)
	//lint:ignore SA1019 kustomize still builds the deprecated fields, so they are checked too
	bases := kust.Bases
	for _, l := range []struct {
		field string
		list  []string
	}{{"resources", kust.Resources}, {"bases", bases}, {"components", kust.Components}, {"crds", kust.Crds}} {
		field := l.field
		for _, e := range l.list {
			if remote(e) {
				return refuse(field, e, "a remote base or file")
			}
			if _, err := fs.Stat(k.fsys, path.Join(dir, e)); err != nil {
				return refuse(field, e, "no such file or folder")
			}
		}
	}
	var paths []struct{ field, value string }
	add := func(field string, values ...string) {
		for _, v := range values {
			paths = append(paths, struct{ field, value string }{field, v})
		}
	}
	add("configurations", kust.Configurations...)
	add("generators", kust.Generators...)
	add("transformers", kust.Transformers...)
	add("validators", kust.Validators...)
	//lint:ignore SA1019 kustomize still builds the deprecated fields, so they are checked too
	for _, p := range kust.PatchesStrategicMerge {
		add("patchesStrategicMerge", string(p))
	}
	//lint:ignore SA1019 kustomize still builds the deprecated fields, so they are checked too
	for _, p := range append(kust.Patches, kust.PatchesJson6902...) {
		add("patches.path", p.Path)
	}
	for _, r := range kust.Replacements {
		add("replacements.path", r.Path)
	}
	add("openapi.path", kust.OpenAPI["path"])
	for _, g := range kust.ConfigMapGenerator {
		add("configMapGenerator", append(append(g.FileSources, g.EnvSources...), g.EnvSource)...)
	}
	for _, g := range kust.SecretGenerator {
		add("secretGenerator", append(append(g.FileSources, g.EnvSources...), g.EnvSource)...)
	}
	for _, p := range paths {
		if !strings.Contains(p.value, "\n") && remote(p.value) {
			return refuse(p.field, p.value, "a remote file")
		}
	}
	if len(kust.HelmCharts) > 0 || kust.HelmGlobals != nil || len(kust.HelmChartInflationGenerator) > 0 {
		return fmt.Errorf("%s: helmCharts: converge builds a kustomization from local files only, without running helm", Name(k.fsys, name))
	}
	return nil
}

// remote is an entry kustomize would fetch: a URL, or a git repository as
// kustomize writes one.
func remote(entry string) bool {
	e := strings.TrimSpace(entry)
	for _, prefix := range []string{"git@", "git::", "gh:", "github.com/", "gitlab.com/", "bitbucket.org/"} {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return strings.Contains(e, "://")
}

// memFile is a file read in full.
type memFile struct {
	*strings.Reader
	info fs.FileInfo
}

func (f *memFile) Write([]byte) (int, error)  { return 0, errReadOnly }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Stat() (os.FileInfo, error) { return f.info, nil }
