package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/userfile"
)

// project is config/ as a kubebuilder project lays it out: folders built
// by kustomize, objects naming the namespace "system" that
// config/default replaces, with a name prefix.
func project() fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	return fstest.MapFS{
		"config/default/kustomization.yaml": file(`namespace: demo-system
namePrefix: demo-
resources:
- ../rbac
`),
		"config/rbac/kustomization.yaml": file(`resources:
# All RBAC will be applied under this service account in
# the deployment namespace.
- service_account.yaml
- role.yaml
- role_binding.yaml
`),
		"config/rbac/service_account.yaml": file(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: controller-manager
  namespace: system
`),
		"config/rbac/role.yaml": file(`---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
`),
		"config/rbac/role_binding.yaml": file(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: manager-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: manager-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
`),
		"config/plain/a.yaml":    file("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# only a comment\n"),
		"config/plain/b.json":    file(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}`),
		"config/plain/notes.txt": file("not a manifest"),
	}
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Subjects []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"subjects"`
	RoleRef struct {
		Name string `json:"name"`
	} `json:"roleRef"`
}

func decode(t *testing.T, docs []Doc) []object {
	t.Helper()
	var out []object
	for _, d := range docs {
		var o object
		require.NoError(t, yaml.Unmarshal(d.Raw, &o), "%s, document %d", d.Source, d.N)
		out = append(out, o)
	}
	return out
}

func TestReadBuildsAKustomizationAsKustomizeDoes(t *testing.T) {
	docs, err := Read(project(), "config/rbac", Limits{Total: 1 << 20})
	require.NoError(t, err)
	objs := decode(t, docs)
	require.Len(t, objs, 3)
	assert.Equal(t, "ServiceAccount", objs[0].Kind, "the kustomization's order")
	assert.Equal(t, "system", objs[0].Metadata.Namespace, "no namespace set: the files' own")
	assert.Equal(t, "config/rbac (kustomize build)", docs[0].Source)

	docs, err = Read(project(), "config/default", Limits{Total: 1 << 20})
	require.NoError(t, err)
	objs = decode(t, docs)
	require.Len(t, objs, 3)
	assert.Equal(t, "demo-controller-manager", objs[0].Metadata.Name)
	assert.Equal(t, "demo-system", objs[0].Metadata.Namespace)
	assert.Equal(t, "demo-manager-role", objs[2].RoleRef.Name, "references follow the prefix")
	require.Len(t, objs[2].Subjects, 1)
	assert.Equal(t, "demo-controller-manager", objs[2].Subjects[0].Name)
	assert.Equal(t, "demo-system", objs[2].Subjects[0].Namespace)
}

func TestReadAPlainFolderAndAFile(t *testing.T) {
	docs, err := Read(project(), "config/plain", Limits{Total: 1 << 20})
	require.NoError(t, err)
	objs := decode(t, docs)
	require.Len(t, objs, 2, "the comment-only document and the .txt file hold no object")
	assert.Equal(t, []string{"a", "b"}, []string{objs[0].Metadata.Name, objs[1].Metadata.Name})
	assert.Equal(t, "config/plain/b.json", docs[1].Source)
	assert.Equal(t, 1, docs[1].N)

	docs, err = Read(project(), "config/rbac/role.yaml", Limits{Total: 1 << 20})
	require.NoError(t, err)
	require.Len(t, docs, 1)
	assert.Equal(t, "config/rbac/role.yaml", docs[0].Source)
}

func TestReadRefusesWhatIsNotLocal(t *testing.T) {
	for name, kustomization := range map[string]string{
		"a remote base":         "resources:\n- github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6\n",
		"a URL":                 "resources:\n- https://example.com/deploy.yaml\n",
		"an ssh repository":     "resources:\n- git@github.com:org/repo.git\n",
		"a remote patch":        "resources:\n- ../rbac\npatches:\n- path: https://example.com/patch.yaml\n",
		"a remote configMap":    "resources:\n- ../rbac\nconfigMapGenerator:\n- name: c\n  files:\n  - https://example.com/f\n",
		"a helm chart":          "helmCharts:\n- name: minecraft\n  repo: https://itzg.github.io/minecraft-server-charts\n",
		"a resource not there":  "resources:\n- missing.yaml\n",
		"a component not there": "components:\n- ../nowhere\n",
	} {
		t.Run(name, func(t *testing.T) {
			fsys := project()
			fsys["config/bad/kustomization.yaml"] = &fstest.MapFile{Data: []byte(kustomization)}
			_, err := Read(fsys, "config/bad", Limits{Total: 1 << 20})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "config/bad/kustomization.yaml: ")
			assert.Contains(t, err.Error(), "converge builds a kustomization from local files only")
		})
	}
}

func TestReadOutsideItsRootIsKustomizesError(t *testing.T) {
	fsys := project()
	fsys["config/bad/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources:\n- ../rbac/role.yaml\n")}
	_, err := Read(fsys, "config/bad", Limits{Total: 1 << 20})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kustomize build")
	assert.Contains(t, err.Error(), "is not in or below")
}

func TestReadIsBounded(t *testing.T) {
	_, err := Read(project(), "config/rbac", Limits{Total: 100})
	var tl *userfile.TooLargeError
	require.ErrorAs(t, err, &tl)

	// Each level includes the one below twice, under two prefixes: 2^30
	// copies of the bottom unless the reads are counted.
	fsys := fstest.MapFS{"l0/cm.yaml": &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n")}}
	fsys["l0/kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources:\n- cm.yaml\n")}
	for i := 1; i <= 30; i++ {
		for _, side := range []string{"a", "b"} {
			fsys[fmt.Sprintf("l%d/%s/kustomization.yaml", i, side)] = &fstest.MapFile{Data: fmt.Appendf(nil, "namePrefix: %s-\nresources:\n- ../../l%d\n", side, i-1)}
		}
		fsys[fmt.Sprintf("l%d/kustomization.yaml", i)] = &fstest.MapFile{Data: []byte("resources:\n- a\n- b\n")}
	}
	_, err = Read(fsys, "l30", Limits{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read more than")
}

func TestReadTwoKustomizationFiles(t *testing.T) {
	fsys := project()
	fsys["config/rbac/Kustomization"] = &fstest.MapFile{Data: []byte("resources: []\n")}
	_, err := Read(fsys, "config/rbac", Limits{Total: 1 << 20})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "more than one kustomization file"), err.Error())
}

// Files of the disk are named by their paths on it, in Doc.Source and in
// errors, whatever folder the file system is rooted at.
func TestNamesFilesAsOnDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	write("plain/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	write("remote/kustomization.yaml", "resources:\n- https://example.com/x.yaml\n")
	write("built/kustomization.yaml", "resources:\n- cm.yaml\n")
	write("built/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
	for _, root := range []string{"/", dir} {
		fsys := userfile.FS(root)
		rel := func(p string) string {
			r, err := filepath.Rel(root, filepath.Join(dir, p))
			require.NoError(t, err)
			return filepath.ToSlash(r)
		}
		docs, err := Read(fsys, rel("plain"), Limits{})
		require.NoError(t, err)
		require.Len(t, docs, 1)
		assert.Equal(t, filepath.Join(dir, "plain", "cm.yaml"), docs[0].Source)

		docs, err = Read(fsys, rel("built"), Limits{})
		require.NoError(t, err)
		require.Len(t, docs, 1)
		assert.Equal(t, filepath.Join(dir, "built")+" (kustomize build)", docs[0].Source)

		_, err = Read(fsys, rel("remote"), Limits{})
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), filepath.Join(dir, "remote", "kustomization.yaml")+": resources"), err.Error())

		_, err = Read(fsys, rel("plain"), Limits{File: 8})
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(dir, "plain", "cm.yaml"))
	}
}
