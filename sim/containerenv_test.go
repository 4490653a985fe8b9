package sim_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/sim"
)

// writeFiles writes name: content under a new folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

const managerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
spec:
  template:
    spec:
      containers:
      - name: kube-rbac-proxy
        image: proxy
        env:
        - name: NOT_MINE
          value: "1"
      - name: manager
        image: controller:latest
        envFrom:
        - configMapRef:
            name: settings
        - secretRef:
            name: absent
            optional: true
        - prefix: DB_
          secretRef:
            name: db
        env:
        - name: MEMCACHED_IMAGE
          value: memcached:1.6
        - name: IMAGE_REF
          value: $(MEMCACHED_IMAGE)@sha $$(MEMCACHED_IMAGE) $(UNKNOWN)
        - name: LEVEL
          value: debug
        - name: WATCH_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: TOKEN
          valueFrom:
            secretKeyRef:
              name: db
              key: token
        - name: MISSING
          valueFrom:
            configMapKeyRef:
              name: elsewhere
              key: x
        - name: MAYBE
          valueFrom:
            configMapKeyRef:
              name: elsewhere
              key: x
              optional: true
`

// TestReadContainerEnv: the manager container's environment as the
// kubelet would give it, from what the manifests hold (a kustomize
// configMapGenerator's ConfigMap, whose name kustomize hashes, and a
// Secret), with what they cannot give named.
func TestReadContainerEnv(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"manager.yaml": managerDeployment,
		"secret.yaml":  "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  token: s3cret\ndata:\n  host: ZGIubG9jYWw=\n",
		"kustomization.yaml": `namespace: system
resources:
- manager.yaml
- secret.yaml
configMapGenerator:
- name: settings
  literals:
  - LEVEL=info
  - FEATURE=on
`,
	})
	env, err := sim.ReadContainerEnv("", dir)
	require.NoError(t, err)
	assert.Equal(t, "Deployment controller-manager, container manager", env.Workload)
	assert.Equal(t, []sim.EnvVar{
		{Name: "FEATURE", Value: "on"},
		{Name: "DB_host", Value: "db.local"},
		{Name: "DB_token", Value: "s3cret"},
		{Name: "MEMCACHED_IMAGE", Value: "memcached:1.6"},
		{Name: "IMAGE_REF", Value: "memcached:1.6@sha $(MEMCACHED_IMAGE) $(UNKNOWN)"},
		{Name: "LEVEL", Value: "debug"},
		{Name: "TOKEN", Value: "s3cret"},
	}, env.Env, "envFrom first, env after it and over it")
	assert.Equal(t, []sim.UnresolvedVar{
		{Name: "WATCH_NAMESPACE", Why: "the pod's metadata.namespace"},
		{Name: "MISSING", Why: "key x of ConfigMap elsewhere, which is not in the manifests"},
	}, env.Unresolved)

	other, err := sim.ReadContainerEnv("kube-rbac-proxy", filepath.Join(dir, "manager.yaml"))
	require.NoError(t, err)
	assert.Equal(t, []sim.EnvVar{{Name: "NOT_MINE", Value: "1"}}, other.Env)
}

// TestReadContainerEnvSaysWhatItCannotRead: no workload, no such
// container, two of them, or a manifest that does not parse: an error
// that names what it looked for and where.
func TestReadContainerEnvSaysWhatItCannotRead(t *testing.T) {
	dir := writeFiles(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"})
	_, err := sim.ReadContainerEnv("", dir)
	assert.ErrorContains(t, err, "no Deployment, StatefulSet or DaemonSet in "+dir)

	dir = writeFiles(t, map[string]string{"d.yaml": managerDeployment})
	_, err = sim.ReadContainerEnv("operator", dir)
	assert.ErrorContains(t, err, "container operator not in "+dir+", which hold Deployment controller-manager, container kube-rbac-proxy; Deployment controller-manager, container manager")

	dir = writeFiles(t, map[string]string{"a.yaml": managerDeployment, "b.yaml": managerDeployment})
	_, err = sim.ReadContainerEnv("", dir)
	assert.ErrorContains(t, err, `two containers named "manager"`)

	dir = writeFiles(t, map[string]string{"d.yaml": "apiVersion: apps/v1\nkind: Deployment\nspec: [\n"})
	_, err = sim.ReadContainerEnv("", dir)
	assert.ErrorContains(t, err, "d.yaml, document 1")

	dir = writeFiles(t, map[string]string{"d.yaml": "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers: 3\n"})
	_, err = sim.ReadContainerEnv("", dir)
	assert.ErrorContains(t, err, "d.yaml, document 1")

	dir = writeFiles(t, map[string]string{"d.yaml": "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        env:\n        - name: \"A=B\"\n          value: x\n        - name: NUL\n          value: \"a\\0b\"\n        - name: OK\n          value: fine\n"})
	env, err := sim.ReadContainerEnv("", dir)
	require.NoError(t, err)
	assert.Equal(t, []sim.EnvVar{{Name: "OK", Value: "fine"}}, env.Env)
	require.Len(t, env.Unresolved, 2)
	assert.Equal(t, "A=B", env.Unresolved[0].Name)
	assert.Contains(t, env.Unresolved[0].Why, "not a variable a process can have: a valid environment variable name must consist of")
	assert.Equal(t, sim.UnresolvedVar{Name: "NUL", Why: "not a variable a process can have: its value holds a NUL byte"}, env.Unresolved[1])

	_, err = sim.ReadContainerEnv("", filepath.Join(t.TempDir(), "absent"))
	assert.ErrorContains(t, err, "absent")
}
