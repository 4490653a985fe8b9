package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/converge-lab/converge/internal/kubebuilder"
)

// TestInitNamesEveryTestItWrote: the go test command init suggests runs
// each package it wrote a test in, a multigroup project's several.
func TestInitNamesEveryTestItWrote(t *testing.T) {
	files := func(paths ...string) []kubebuilder.File {
		var out []kubebuilder.File
		for _, p := range paths {
			out = append(out, kubebuilder.File{Path: p})
		}
		return out
	}
	assert.Equal(t, "internal/controller", testDir(files("internal/controller/converge_test.go", "internal/controller/testdata/converge/a.yaml")))
	assert.Equal(t, "internal/controller/...", testDir(files(
		"internal/controller/apps/converge_test.go", "internal/controller/apps/testdata/converge/frontend.yaml",
		"internal/controller/infra/converge_test.go")))
	assert.Equal(t, "...", testDir(files("a/converge_test.go", "b/converge_test.go")))
	assert.Equal(t, "...", testDir(nil))
}
