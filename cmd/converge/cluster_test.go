package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/kwok"
)

// run --backend cluster goes through the compiled tests too, with the
// kubeconfig passed on: here an administrator kubeconfig of an envtest
// control plane, as a kind cluster's would be. The same API server then
// checks the campaign's Job.
func TestRunOnACluster(t *testing.T) {
	t.Parallel() // it waits in real time (a control plane, a build): the others need not
	cp, err := envtest.StartControlPlane(context.Background())
	if errors.Is(err, envtest.ErrNoAssets) && !envtest.Required() {
		t.Skipf("SKIPPED (envtest): %v. Set CI=true or CONVERGE_REQUIRE_ENVTEST=1 to make this a failure.", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cp.Stop()) })
	user, err := cp.AddUser(crenvtest.User{Name: "converge-admin", Groups: []string{"system:masters"}})
	require.NoError(t, err)
	data, err := user.KubeConfig()
	require.NoError(t, err)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, data, 0o600))

	file := scenarioFile(t, filepath.Join(dir, "on-cluster.yaml"), "on-cluster")
	spec, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(spec), "timing:", "backends: [cluster]\ntiming:", 1)), 0o644))
	report := filepath.Join(dir, "r")
	out, err := run(t, "run", file, "--backend", "cluster", "--kubeconfig", kubeconfig, "--report", report, "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	assert.Contains(t, out, "PASS  on-cluster/cluster/seed-1")
	assert.Contains(t, out, "1 runs, 0 failed")
	assert.FileExists(t, filepath.Join(report, "on-cluster_cluster_1.json"))

	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	require.NoError(t, err)
	createCampaign(t, client)
}

// run --backend cluster --kwok starts a kwokctl cluster for the invocation,
// runs there (kube-scheduler binding the pods) and deletes it; converge
// kwok -- CMD hands a cluster to a command and passes its status on.
func TestRunOnKwok(t *testing.T) {
	t.Parallel() // it waits in real time (a control plane, a build): the others need not
	if _, _, err := kwok.Binaries(""); errors.Is(err, kwok.ErrNoBinaries) && !kwok.Required() {
		t.Skipf("SKIPPED (kwok): %v. Set CI=true or CONVERGE_REQUIRE_KWOK=1 to make this a failure.", err)
	}
	dir := t.TempDir()
	file := scenarioFile(t, filepath.Join(dir, "on-kwok.yaml"), "on-kwok")
	spec, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(spec), "timing:", "backends: [cluster]\ntiming:", 1)), 0o644))
	report := filepath.Join(dir, "r")
	out, err := run(t, "run", file, "--backend", "cluster", "--kwok", "--report", report, "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	assert.Regexp(t, `kwok cluster converge-\S+ ready in`, out)
	assert.Contains(t, out, "PASS  on-kwok/cluster/seed-1")
	res, err := reports.Read(filepath.Join(report, "on-kwok_cluster_1.json"))
	require.NoError(t, err)
	assert.Contains(t, res.Replay, "-converge.kwok=start", "a replay starts a cluster of its own")

	// converge replay too, with --kwok: a cluster of its own, the same
	// verdict and schedule.
	result := filepath.Join(report, "on-kwok_cluster_1.json")
	out, err = run(t, "replay", result, "--test-binary", scenarioTests(t))
	assert.Equal(t, 2, exitCode(err), out)
	assert.ErrorContains(t, err, "is a run on a cluster: replay it on one with --kubeconfig PATH, or --kwok")
	out, err = run(t, "replay", result, "--kwok", "--test-binary", scenarioTests(t))
	require.NoError(t, err, out)
	assert.Regexp(t, `kwok cluster converge-\S+ ready in`, out)
	assert.Contains(t, out, "replay: pass=true")

	out, err = run(t, "kwok", "--", "sh", "-c", `test -s "$KUBECONFIG" && exit 7`)
	assert.Equal(t, 7, exitCode(err), "%v\n%s", err, out)
}
