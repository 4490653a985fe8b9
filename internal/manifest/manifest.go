// Package manifest reads Kubernetes manifests as a user keeps them: a file
// of YAML or JSON documents, a folder of such files, or a kustomization (a
// folder holding a kustomization.yaml), built in process as `kustomize
// build` builds it, so that a project's config/ is read as it is applied.
//
// Everything is read through an fs.FS, regular files only, within a limit
// on the bytes read. A kustomization is built from local files only: a
// remote base, a remote file, a Helm chart or a plugin is refused, so that
// reading a manifest never reaches the network or runs a program.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/converge-lab/converge/internal/userfile"
)

// Doc is one YAML or JSON document.
type Doc struct {
	// Source is the file the document was read from, or for a
	// kustomization its folder and how it was built, named as Name names
	// it.
	Source string
	// N is the document's number in Source, from 1.
	N   int
	Raw []byte
}

// Limits bound what a Read reads; zero is no bound.
type Limits struct {
	// File bounds each file.
	File int64
	// Total bounds all the files together, a file a kustomization reads
	// twice counted twice.
	Total int64
}

func (l Limits) file(total int64) int64 {
	left := int64(math.MaxInt64)
	if l.Total > 0 {
		left = l.Total - total
	}
	if l.File > 0 {
		left = min(left, l.File)
	}
	return left
}

// Read returns the non-empty documents of name in fsys: a file's, a
// folder's files' (*.yaml, *.yml and *.json, in name order, not
// recursive), or, for a folder holding a kustomization, the objects
// kustomize builds from it.
func Read(fsys fs.FS, name string, limit Limits) ([]Doc, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return readFiles(fsys, []string{name}, limit)
	}
	if k, err := Kustomization(fsys, name); err != nil {
		return nil, err
	} else if k != "" {
		return Build(fsys, name, limit)
	}
	entries, err := fs.ReadDir(fsys, name)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if ext := path.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			names = append(names, path.Join(name, e.Name()))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json file, and no kustomization", Name(fsys, name))
	}
	return readFiles(fsys, names, limit)
}

// kustomizationNames are the file names kustomize recognises, in its
// order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Kustomization is the path of dir's kustomization file, or "" when it has
// none. Two of them are an error, as they are to kustomize.
func Kustomization(fsys fs.FS, dir string) (string, error) {
	var found []string
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if info, err := fs.Stat(fsys, p); err == nil && !info.IsDir() {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s holds more than one kustomization file (%s): kustomize accepts one", Name(fsys, dir), path.Base(found[0])+", "+path.Base(found[1]))
}

// readFiles reads the documents of files.
func readFiles(fsys fs.FS, files []string, limit Limits) ([]Doc, error) {
	var out []Doc
	var total int64
	for _, f := range files {
		data, err := ReadFile(fsys, f, limit.file(total))
		if err != nil {
			return nil, err
		}
		total += int64(len(data))
		docs, err := Split(Name(fsys, f), data)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

// Split is data, read from source, as its non-empty YAML documents.
func Split(source string, data []byte) ([]Doc, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Doc
	for n := 1; ; n++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", source, n, err)
		}
		if len(bytes.TrimSpace(raw)) > 0 && !onlyComments(raw) {
			out = append(out, Doc{Source: source, N: n, Raw: slices.Clone(raw)})
		}
	}
}

// onlyComments: a document of comments alone holds no object.
func onlyComments(raw []byte) bool {
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// ReadFile reads the regular file name of fsys, at most left bytes of it:
// more is an error. It is checked before it is opened, since an open of a
// pipe waits for a writer.
func ReadFile(fsys fs.FS, name string, left int64) ([]byte, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if err := userfile.Regular(Name(fsys, name), st.Mode()); err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	left = max(left, 0)
	data, err := io.ReadAll(io.LimitReader(f, min(left, math.MaxInt64-1)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name(fsys, name), err)
	}
	if int64(len(data)) > left {
		return nil, &userfile.TooLargeError{Name: Name(fsys, name), Max: left}
	}
	return data, nil
}

// Name is name, a path of fsys, as the user would write it: what fsys's
// DisplayName method makes of it (userfile.FS: the path on disk), or name
// itself. Errors and Doc.Source name files so.
func Name(fsys fs.FS, name string) string {
	if d, ok := fsys.(interface{ DisplayName(string) string }); ok {
		return d.DisplayName(name)
	}
	return name
}
