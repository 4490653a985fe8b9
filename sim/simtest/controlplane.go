package simtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/sim"
)

// CheckAPIServerRestart restarts env's API server under a running informer
// of the run's pods: its watch breaks and it watches again, and the pods
// kube-controller-manager creates for d (two replicas, created after the
// restart) reach its cache, both through the restarted server. Each
// control plane with sim.ControlPlane runs it.
func CheckAPIServerRestart(t *testing.T, env *sim.Env, d *appsv1.Deployment) {
	t.Helper()
	require.NotNil(t, env.ControlPlane, "the backend restarts its API server")
	ctx := context.Background()

	var mu sync.Mutex
	watches := 0
	cfg := env.RESTConfig
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") == "true" {
				mu.Lock()
				watches++
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(env.Namespace))
	inf := factory.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	mu.Lock()
	before := watches
	mu.Unlock()

	require.NoError(t, env.ControlPlane.RestartAPIServer(ctx))
	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(inf.GetStore().ListKeys()) == 2 }, time.Minute, 50*time.Millisecond,
		"kube-controller-manager created the pods and the informer saw them, both through the restarted server")
	mu.Lock()
	assert.Greater(t, watches, before, "the informer watched again")
	mu.Unlock()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// CheckCompaction compacts the etcd behind env (served at etcdURL): a read
// of etcd at a revision before the compaction fails. (The API server's
// watch cache still answers recent resourceVersions itself, so no 410
// reaches clients from this alone.)
func CheckCompaction(t *testing.T, env *sim.Env, etcdURL string) {
	t.Helper()
	require.NotNil(t, env.ControlPlane, "the backend compacts its storage")
	ctx := context.Background()
	cms := env.Observer.CoreV1().ConfigMaps(env.Namespace)
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	readAt := func() (int, string) {
		body := fmt.Sprintf(`{"key":"Lw==","range_end":"MA==","revision":%s,"count_only":true}`, first.ResourceVersion)
		resp, err := http.Post(etcdURL+"/v3/kv/range", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	code, body := readAt()
	require.Equal(t, http.StatusOK, code, "readable before: %s", body)

	require.NoError(t, env.ControlPlane.Compact(ctx))
	code, body = readAt()
	assert.NotEqual(t, http.StatusOK, code)
	assert.Contains(t, body, "compacted")
}
