package cluster_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

// writeKubeconfig writes an administrator kubeconfig for the envtest control
// plane: the cluster backend then takes the same path as with kind.
func writeKubeconfig(t *testing.T, cp *envtest.ControlPlane) string {
	t.Helper()
	user, err := cp.AddUser(crenvtest.User{Name: "converge-admin", Groups: []string{"system:masters"}})
	require.NoError(t, err)
	data, err := user.KubeConfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// TestClusterBackendThroughAKubeconfig runs on the envtest control plane
// through a written kubeconfig, or on the cluster CONVERGE_CLUSTER_KUBECONFIG
// names (make kind-chaos), where the real scheduler places the pods.
func TestClusterBackendThroughAKubeconfig(t *testing.T) {
	kubeconfig, schedule := os.Getenv("CONVERGE_CLUSTER_KUBECONFIG"), false
	if kubeconfig == "" {
		kubeconfig, schedule = writeKubeconfig(t, simtest.Require(t)), true
	}
	b, err := cluster.New(cluster.Config{Kubeconfig: kubeconfig})
	require.NoError(t, err)
	ctx := context.Background()
	env, err := b.Start(ctx)
	require.NoError(t, err)
	assert.True(t, env.Can.Has("real-controllers"))

	// envtest has no scheduler: the world plays it here; on kind the real
	// one places pods through world.Placement.
	w, err := world.New(world.Config{Client: env.Observer, Namespace: env.Namespace, Scheduler: schedule, KeepNodesAlive: true,
		Readiness: world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second}})
	require.NoError(t, err)
	_, logCtx := ktesting.NewTestContext(t)
	runCtx, cancel := context.WithCancel(logCtx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
	world.Placement(&d.Spec.Template.Spec, env.Namespace)
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 2
	}, time.Minute, 100*time.Millisecond, "real controllers and the world's kubelet bring the pods up")

	lease, err := env.Observer.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, w.Nodes()[0], metav1.GetOptions{})
	require.NoError(t, err, "the simulated Nodes are kept alive")
	assert.NotNil(t, lease.Spec.RenewTime)

	scaler, err := kubernetes.NewForConfig(env.ControllerConfig)
	require.NoError(t, err)
	_, err = scaler.AppsV1().Deployments(env.Namespace).List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "the impersonated scaler may list Deployments")
	_, err = scaler.CoreV1().Secrets(env.Namespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "but has only config/'s rights: %v", err)

	cancel()
	require.NoError(t, <-done)
	require.NoError(t, b.Stop())
	ns, err := env.Observer.CoreV1().Namespaces().Get(ctx, env.Namespace, metav1.GetOptions{})
	if err == nil {
		assert.NotNil(t, ns.DeletionTimestamp, "the run's namespace is being deleted")
	}
}

func TestUnreachableCluster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	b, err := cluster.New(cluster.Config{Kubeconfig: path, Timeout: 2 * time.Second})
	require.NoError(t, err)
	_, err = b.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach the API server at https://"+addr)

	b, err = cluster.New(cluster.Config{Kubeconfig: filepath.Join(t.TempDir(), "missing")})
	require.NoError(t, err)
	_, err = b.Start(context.Background())
	assert.ErrorContains(t, err, "loading kubeconfig")
}
