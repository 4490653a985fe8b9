package kubebuilder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/simtest/tier"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

func TestMain(m *testing.M) {
	simtest.BuildAsThisBinary()
	os.Exit(m.Run())
}

// copyFixture copies testdata/name, a project as kubebuilder scaffolds it,
// to a folder of the test's.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))))
	return dir
}

// TestInitOnAKubebuilderProject is a kubebuilder user's first hour: a
// project scaffolded by kubebuilder v4 (`init`, `create api`, a reconciler
// that keeps a ConfigMap per Widget and reports Available, `make manifests`;
// the reconciler reads a variable that config/manager's Deployment sets, as
// deploy-image's does), on controller-runtime v0.24.1, one minor behind
// converge's newest. converge init writes its test and a starter scenario;
// adding converge keeps the project's Kubernetes modules' versions and its
// go line (go 1.26.0, as kubebuilder writes it); and its go test passes,
// kubebuilder's own envtest suite beside it, with the scaffold's RBAC, CRDs
// and samples as they are. That go test is of the full tier: it compiles the
// project's own module graph (controller-runtime v0.24, client-go v0.36)
// again, some minutes of a cold machine's cores.
func TestInitOnAKubebuilderProject(t *testing.T) {
	dir := copyFixture(t, "widgets")
	root, err := Find(filepath.Join(dir, "internal", "controller"))
	require.NoError(t, err)
	assert.Equal(t, dir, root)
	files, notes, err := Plan(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"POD_NAMESPACE: not set in the test, as config/manager gives it no value (the pod's metadata.namespace): set it in the test if the operator needs it"}, notes)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"internal/controller/converge_test.go", "internal/controller/testdata/converge/widget.yaml"}, paths)
	require.NoError(t, Write(root, files))
	scenario, err := os.ReadFile(filepath.Join(root, "internal/controller/testdata/converge/widget.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(scenario), "type: Available", "the kind has conditions and the reconciler sets Available")
	assert.Contains(t, string(scenario), "kind: ConfigMap", "its role lets it create ConfigMaps: their owner must exist")
	test, err := os.ReadFile(filepath.Join(root, "internal/controller/converge_test.go"))
	require.NoError(t, err)
	assert.Contains(t, string(test), `scenariotest.SetenvFrom(t, "manager", "../../config/manager")`,
		"the reconciler reads WIDGET_LABEL, which config/manager's Deployment sets")
	err = Write(root, files)
	assert.ErrorContains(t, err, "internal/controller/converge_test.go, internal/controller/testdata/converge/widget.yaml already there")

	// The user adds converge (here: this checkout) and runs go test.
	before := kubernetesModules(t, root)
	converge, err := filepath.Abs("../..")
	require.NoError(t, err)
	goCmd := func(args ...string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	_, err = goCmd("mod", "edit", "-require=github.com/converge-lab/converge@v0.0.0", "-replace=github.com/converge-lab/converge="+converge)
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(converge, "go.sum"))
	require.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(root, "go.sum"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(sum)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, err := goCmd("mod", "tidy")
	require.NoError(t, err, out)
	after := kubernetesModules(t, root)
	t.Logf("the project's Kubernetes modules before adding converge:\n%s\nand after:\n%s", before, after)
	// A module converge requires at a newer version than the project's
	// is raised to it, as Go's minimal version selection does; no other.
	// With converge at the oldest minors it supports (its go.mod), the
	// fixture's one minor behind the newest keeps every version.
	own := kubernetesModules(t, converge)
	for path, v := range before.versions {
		want := v
		if o := own.versions[path]; o != "" && semver.Compare(o, v) > 0 {
			want = o
		}
		assert.Equal(t, want, after.versions[path], "adding converge changed %s, which it requires at %q", path, own.versions[path])
	}
	// Nor its go line: a go line raised past the project's Go toolchain
	// makes go download another one, or refuse to build under
	// GOTOOLCHAIN=local.
	assert.Equal(t, before.goVersion, after.goVersion, "adding converge changed the project's go line; converge's is go %s", own.goVersion)
	t.Run("go test", func(t *testing.T) {
		tier.Full(t, "compiles the project's own module graph")
		// Built as this binary was (GOFLAGS, from TestMain).
		out, err := goCmd("test", "-count=1", "-v", "./internal/controller")
		require.NoError(t, err, "%s", lastLines(out, 60))
		assert.Contains(t, out, "--- PASS: TestScenarios/widget/fake/seed-1")
		if !strings.Contains(out, "SKIPPED (envtest)") {
			assert.Contains(t, out, "--- PASS: TestScenarios/widget/envtest/seed-1")
		}
		assert.Contains(t, out, "--- PASS: TestControllers", "kubebuilder's own envtest suite finds the control plane converge's TestMain names")
		assert.Contains(t, out, "RBAC of service account controller-manager: namespace system, named by the RBAC, is each run's own namespace")
	})
}

// TestInitSaysWhatItCannotRead: outside a project, or in one it cannot
// read, init names what it looked for and where, and writes nothing.
func TestInitSaysWhatItCannotRead(t *testing.T) {
	_, err := Find(t.TempDir())
	assert.ErrorIs(t, err, ErrNoProject)
	assert.ErrorContains(t, err, "no PROJECT file in ")

	dir := copyFixture(t, "widgets")
	require.NoError(t, os.Rename(filepath.Join(dir, "internal", "controller"), filepath.Join(dir, "internal", "elsewhere")))
	_, _, err = Plan(dir)
	assert.ErrorContains(t, err, "no reconciler (a type with a SetupWithManager method) in internal/controller under "+dir)

	dir = copyFixture(t, "widgets")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "crd", "bases", "apps.example.com_widgets.yaml"), []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: [\n"), 0o644))
	_, _, err = Plan(dir)
	assert.ErrorContains(t, err, "apps.example.com_widgets.yaml")

	dir = copyFixture(t, "widgets")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "config", "rbac")))
	_, _, err = Plan(dir)
	assert.ErrorContains(t, err, "no config/rbac under "+dir)

	// config/manager is read for the environment only: when it cannot be,
	// the test is written, without it, and a note says why.
	dir = copyFixture(t, "widgets")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", "manager", "kustomization.yaml"), []byte("resources:\n- https://example.com/manager.yaml\n"), 0o644))
	files, notes, err := Plan(dir)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "config/manager")
	assert.Contains(t, notes[0], "https://example.com/manager.yaml")
	assert.Contains(t, notes[0], ": the test sets no environment from it")
	require.NotEmpty(t, files)
	assert.NotContains(t, string(files[0].Data), "SetenvFrom")

	dir = copyFixture(t, "widgets")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ProjectFile), []byte("layout:\n- helm.kubebuilder.io/v1\n"), 0o644))
	_, _, err = Plan(dir)
	assert.ErrorContains(t, err, "converge init knows the Go layouts")
}

// modules is the k8s.io and sigs.k8s.io requirements of a go.mod, and its
// go line.
type modules struct {
	goVersion string
	versions  map[string]string
	lines     []string
}

func (m modules) String() string { return strings.Join(m.lines, "\n") }

func kubernetesModules(t *testing.T, root string) modules {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	f, err := modfile.ParseLax("go.mod", data, nil)
	require.NoError(t, err)
	m := modules{versions: map[string]string{}}
	if f.Go != nil {
		m.goVersion = f.Go.Version
	}
	for _, r := range f.Require {
		if strings.HasPrefix(r.Mod.Path, "k8s.io/") || strings.HasPrefix(r.Mod.Path, "sigs.k8s.io/") {
			m.versions[r.Mod.Path] = r.Mod.Version
			m.lines = append(m.lines, "\t"+r.Mod.Path+" "+r.Mod.Version)
		}
	}
	require.NotEmpty(t, m.versions["sigs.k8s.io/controller-runtime"], "the fixture requires controller-runtime")
	return m
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
