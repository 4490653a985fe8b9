// Package config holds the scaler's manifests (RBAC, Deployment, Namespace)
// and decodes them, so tests and backends use the very files a user applies
// with `kubectl apply -k config`.
//
// It does not run kustomize: Objects returns the files as written, with the
// namespace they name themselves.
package config

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"path"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

//go:embed kustomization.yaml rbac/*.yaml manager/*.yaml
var files embed.FS

// Objects decodes every resource the kustomization lists, in its order.
// Decoding is strict: an unknown or duplicated field is an error that names
// the file.
func Objects() ([]runtime.Object, error) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
	}
	raw, err := files.ReadFile("kustomization.yaml")
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	var out []runtime.Object
	for _, name := range k.Resources {
		data, err := files.ReadFile(path.Clean(name))
		if err != nil {
			return nil, fmt.Errorf("kustomization.yaml lists %s: %w", name, err)
		}
		reader := utilyaml.NewYAMLReader(bufioReader(data))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
