package config_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-lab/converge/config"
)

type manifests struct {
	sa          *corev1.ServiceAccount
	clusterRole *rbacv1.ClusterRole
	crb         *rbacv1.ClusterRoleBinding
	role        *rbacv1.Role
	rb          *rbacv1.RoleBinding
	deployment  *appsv1.Deployment
}

func load(t *testing.T) manifests {
	t.Helper()
	objs, err := config.Objects()
	require.NoError(t, err)
	var m manifests
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			m.sa = o
		case *rbacv1.ClusterRole:
			m.clusterRole = o
		case *rbacv1.ClusterRoleBinding:
			m.crb = o
		case *rbacv1.Role:
			m.role = o
		case *rbacv1.RoleBinding:
			m.rb = o
		case *appsv1.Deployment:
			m.deployment = o
		case *corev1.Namespace:
		default:
			t.Fatalf("unexpected object %T", o)
		}
	}
	require.Len(t, objs, 7)
	for _, o := range []runtime.Object{m.sa, m.clusterRole, m.crb, m.role, m.rb, m.deployment} {
		require.NotNil(t, o)
	}
	return m
}

// TestRBACIsExactlyWhatTheScalerUses pins the rules: adding a verb is a
// decision, not an accident.
func TestRBACIsExactlyWhatTheScalerUses(t *testing.T) {
	m := load(t)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, m.clusterRole.Rules)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}, m.role.Rules)

	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: m.sa.Name, Namespace: m.sa.Namespace}
	assert.Equal(t, []rbacv1.Subject{subject}, m.crb.Subjects)
	assert.Equal(t, []rbacv1.Subject{subject}, m.rb.Subjects)
	assert.Equal(t, m.clusterRole.Name, m.crb.RoleRef.Name)
	assert.Equal(t, "ClusterRole", m.crb.RoleRef.Kind)
	assert.Equal(t, m.role.Name, m.rb.RoleRef.Name)
	assert.Equal(t, m.deployment.Namespace, m.role.Namespace, "the Lease lives beside the scaler")
}

func TestDeploymentIsProductionReady(t *testing.T) {
	m := load(t)
	d := m.deployment
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	args := flagValues(c.Args)

	assert.Equal(t, m.sa.Name, pod.ServiceAccountName)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Contains(t, args, "leader-elect")

	grace := duration(t, args["shutdown-grace"])
	renew := duration(t, args["leader-elect-renew-deadline"])
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	assert.Greater(t, time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second, grace+renew,
		"SIGKILL must not cut the drain and the Lease release")

	limit := c.Resources.Limits[corev1.ResourceMemory]
	require.False(t, limit.IsZero(), "a memory limit")
	gomemlimit := envValue(c, "GOMEMLIMIT")
	require.True(t, strings.HasSuffix(gomemlimit, "MiB"), "GOMEMLIMIT in MiB, got %q", gomemlimit)
	soft := resource.MustParse(strings.TrimSuffix(gomemlimit, "B")) // 100MiB -> 100Mi
	assert.Equal(t, -1, soft.Cmp(limit), "GOMEMLIMIT %s below the limit %s", gomemlimit, limit.String())

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, ":"+itoa(ports["health"]), args["health-addr"])
	assert.Equal(t, ":"+itoa(ports["metrics"]), args["metrics-addr"])
	for probe, path := range map[*corev1.Probe]string{c.StartupProbe: "/healthz", c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe)
		assert.Equal(t, path, probe.HTTPGet.Path)
		assert.Equal(t, "health", probe.HTTPGet.Port.StrVal)
	}

	for _, name := range []string{"POD_NAME", "POD_NAMESPACE"} {
		assert.NotNil(t, envFrom(c, name), "%s from the downward API", name)
	}
	require.NotNil(t, pod.SecurityContext)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, int32(0), d.Spec.Strategy.RollingUpdate.MaxSurge.IntVal,
		"the old pod must release the Lease before the new one can turn ready")
}

// TestKustomizationBuilds builds the folder with `kubectl kustomize`, or with
// `kustomize build` where kubectl is absent. Under CI having neither fails.
func TestKustomizationBuilds(t *testing.T) {
	var cmd *exec.Cmd
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.Command(kubectl, "kustomize", ".")
	} else if kustomize, err := exec.LookPath("kustomize"); err == nil {
		cmd = exec.Command(kustomize, "build", ".")
	} else {
		if os.Getenv("CI") != "" {
			t.Fatal("neither kubectl nor kustomize on PATH under CI")
		}
		t.Skip("SKIPPED: neither kubectl nor kustomize on PATH; the kustomization is not built")
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	docs := strings.Split(string(out), "\n---\n")
	assert.Len(t, docs, 7)
	for _, doc := range docs {
		assert.NotContains(t, doc, "namespace: default")
	}
}

func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		out[name] = value
	}
	return out
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envFrom(c corev1.Container, name string) *corev1.ObjectFieldSelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.FieldRef
		}
	}
	return nil
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
