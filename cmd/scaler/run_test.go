package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/config"
	"github.com/converge-lab/converge/controller"
)

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, io.Discard, &out)
	require.ErrorIs(t, err, pflag.ErrHelp)

	var o options
	newFlagSet(&o, io.Discard).VisitAll(func(f *pflag.Flag) {
		assert.NotEmpty(t, f.Usage, "flag --%s has no usage text", f.Name)
		assert.Contains(t, out.String(), "--"+f.Name, "--help lists --%s", f.Name)
	})
	for _, want := range []string{controller.LabelEnabled, controller.AnnotationMaxReplicas, "POD_NAME"} {
		assert.Contains(t, out.String(), want)
	}
}

func TestBadInputIsAClearError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	garbage := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(garbage, []byte("clusters: [this is not: a kubeconfig"), 0o600))
	valid := kubeconfig(t, "https://127.0.0.1:1")

	for _, tt := range []struct {
		name  string
		args  []string
		want  string
		usage bool // exit status 2
	}{
		{"not a number", []string{"--workers=many"}, `invalid argument "many" for "--workers"`, true},
		{"unknown flag", []string{"--replicas=3"}, "unknown flag: --replicas", true},
		{"positional argument", []string{"deploy/web"}, "unexpected arguments: deploy/web", true},
		{"log format", []string{"--log-format=xml"}, "--log-format must be text or json", true},
		{"bad address", []string{"--metrics-addr=8080"}, "--metrics-addr", true},
		{"zero qps", []string{"--kube-api-qps=0"}, "--kube-api-qps", true},
		{"missing kubeconfig", []string{"--kubeconfig=" + missing}, "loading kubeconfig", false},
		{"malformed kubeconfig", []string{"--kubeconfig=" + garbage}, "loading kubeconfig", false},
		{"zero workers", []string{"--kubeconfig=" + valid, "--workers=0"}, "--workers must be at least 1, got 0", true},
		{"negative cooldown", []string{"--kubeconfig=" + valid, "--cooldown=-1s"}, "--cooldown must be longer than 0s, got -1s", true},
		{"NaN qps", []string{"--kubeconfig=" + valid, "--kube-api-qps=NaN"}, "--kube-api-qps must be a number between 1e-45 and 3.4e+38, got NaN", true},
		{"bad namespace", []string{"--kubeconfig=" + valid, "--namespace=Web_Team"}, "namespace", false},
		{"lease timings", []string{"--kubeconfig=" + valid, "--leader-elect", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=5s"}, "lease duration 5s must be greater than renew deadline 5s", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, tt.usage, errors.As(err, new(*usageError)), "usage error: %v", err)
		})
	}
}

func TestUnreachableAPIServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	host := "https://" + addr
	err = run(context.Background(), []string{"--kubeconfig=" + kubeconfig(t, host), "--metrics-addr=0", "--health-addr=0"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach the API server at "+host)
	assert.Contains(t, err.Error(), "connection refused")
}

// TestServeWiresProbesAndMetrics runs the binary's serving path on the fake
// clientset: probes and metrics answer over HTTP, and a cancelled context
// shuts everything down cleanly.
func TestServeWiresProbesAndMetrics(t *testing.T) {
	client := fake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{controller.LabelEnabled: controller.ValueEnabled}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	})
	o, err := parseFlags([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0", "--shutdown-grace=5s"}, io.Discard)
	require.NoError(t, err)
	reg := newRegistry()
	ctl, err := controller.New(o.controllerConfig(reg), client)
	require.NoError(t, err)

	addrs := map[string]string{}
	listening := make(chan struct{}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, o, ctl, reg, func(name, addr string) { addrs[name] = addr; listening <- struct{}{} })
	}()
	<-listening
	<-listening

	health := "http://" + addrs["health"]
	require.Eventually(t, func() bool { return get(health+"/readyz") == http.StatusOK }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, http.StatusOK, get(health+"/healthz"))

	resp, err := http.Get("http://" + addrs["metrics"] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	for _, name := range []string{
		"converge_scaler_reconciles_total", "converge_scaler_reconcile_duration_seconds", "converge_scaler_scale_actions_total",
		"converge_scaler_retries_exhausted_total", "workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds",
		"workqueue_work_duration_seconds", "workqueue_retries_total", "workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds", "go_goroutines", "process_cpu_seconds_total",
	} {
		assert.Contains(t, string(body), name)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return within the shutdown grace")
	}
	_, err = http.Get(health + "/readyz")
	assert.Error(t, err, "probe server closed")
}

// TestBinaryExitStatus builds cmd/scaler and checks what a user sees.
func TestBinaryExitStatus(t *testing.T) {
	bin := scalerBinary(t)

	for _, tt := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"--help"}, 0, "Usage: scaler"},
		{[]string{"--workers=x"}, 2, `scaler: invalid argument "x"`},
		{[]string{"--workers=0"}, 2, "scaler: --workers must be at least 1, got 0\n"},
		{[]string{"--kubeconfig=" + kubeconfig(t, "https://127.0.0.1:1"), "--metrics-addr=0", "--health-addr=0"}, 1, "scaler: cannot reach the API server at https://127.0.0.1:1"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.status, status)
			assert.Contains(t, stderr.String(), tt.stderr)
		})
	}
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: t
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// TestManifestArgsAreValidFlags parses the args of config/'s Deployment with
// the binary's own flags, so the manifest cannot drift from the binary.
func TestManifestArgsAreValidFlags(t *testing.T) {
	objs, err := config.Objects()
	require.NoError(t, err)
	var d *appsv1.Deployment
	for _, o := range objs {
		if dep, ok := o.(*appsv1.Deployment); ok {
			d = dep
		}
	}
	require.NotNil(t, d)
	o, err := parseFlags(d.Spec.Template.Spec.Containers[0].Args, io.Discard)
	require.NoError(t, err)
	assert.True(t, o.leaderElect)
	t.Setenv("POD_NAMESPACE", d.Namespace)
	t.Setenv("POD_NAME", "converge-scaler-abc")
	cfg := o.controllerConfig(nil)
	require.NotNil(t, cfg.LeaderElection)
	assert.Equal(t, d.Namespace, cfg.LeaderElection.Namespace)
	assert.Equal(t, "converge-scaler-abc", cfg.LeaderElection.Identity)
}
