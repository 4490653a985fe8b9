package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/sim/simtest"
)

// TestProxyAppliesFaultsToAnyClient: a client built only from the proxy's
// kubeconfig, speaking protobuf as client-go does by default, meets the same
// faults as an in-process JSON client: a tombstone reaches its informer.
func TestProxyAppliesFaultsToAnyClient(t *testing.T) {
	t.Parallel() // a namespace of its own
	_, env := simtest.RequireRun(t, "proxy-")
	ctx := context.Background()

	log := &chaos.Log{}
	inj, err := chaos.NewInjector(chaos.Plan{Recorder: log, Injections: []chaos.Injection{
		{Fault: chaos.Tombstone(chaos.Target{Resource: "pods", Name: "victim"})},
		{Fault: chaos.Conflict(chaos.Target{Resource: "configmaps"}), When: chaos.When{Nth: 1}},
	}})
	require.NoError(t, err)
	proxy, err := chaos.NewProxy(env.RESTConfig, inj)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, proxy.Close()) })
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, proxy.WriteKubeconfig(path))

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	require.Empty(t, cfg.ContentType, "the client keeps its defaults (protobuf)")
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// A plain request and an injected 409, through the proxy.
	_, err = client.CoreV1().ConfigMaps(env.Namespace).Create(ctx, configMap("c"), metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := client.CoreV1().ConfigMaps(env.Namespace).Get(ctx, "c", metav1.GetOptions{})
	require.NoError(t, err)
	c.Data = map[string]string{"k": "v"}
	_, err = client.CoreV1().ConfigMaps(env.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the object has been modified")

	_, err = env.Observer.CoreV1().Pods(env.Namespace).Create(ctx, pod("victim"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, deleted := informerOn(t, cfg, env.Namespace)
	require.NoError(t, env.Observer.CoreV1().Pods(env.Namespace).Delete(ctx, "victim", metav1.DeleteOptions{}))
	select {
	case obj := <-deleted:
		_, ok := obj.(cache.DeletedFinalStateUnknown)
		assert.True(t, ok, "DeleteFunc got %T through the proxy, not a tombstone", obj)
	case <-time.After(30 * time.Second):
		t.Fatal("no delete through the proxy")
	}
	assert.Len(t, log.Firings(), 2)
	_ = os.Remove(path)
}
