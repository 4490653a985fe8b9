package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/simtest"
)

// BenchmarkHTTPLayerIdle compares GETs through the injector and through the
// TLS proxy, with a plan whose only fault targets another resource, to GETs
// through the same client settings without either, in one run on envtest.
func BenchmarkHTTPLayerIdle(b *testing.B) {
	cp := simtest.Require(b)
	be, err := envtest.NewBackend(cp, "bench-")
	require.NoError(b, err)
	env, err := be.Start(context.Background())
	require.NoError(b, err)
	defer func() { _ = be.Stop() }()
	_, err = env.Observer.CoreV1().ConfigMaps(env.Namespace).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(b, err)

	inj, err := chaos.NewInjector(chaos.Plan{Injections: []chaos.Injection{{Fault: chaos.Conflict(chaos.Target{Resource: "leases"})}}})
	require.NoError(b, err)
	direct := rest.CopyConfig(env.RESTConfig)
	direct.ContentType, direct.AcceptContentTypes = "application/json", "application/json"
	proxy, err := chaos.NewProxy(env.RESTConfig, inj)
	require.NoError(b, err)
	defer func() { _ = proxy.Close() }()
	kubeconfig, err := proxy.Kubeconfig()
	require.NoError(b, err)
	viaProxy, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(b, err)
	viaProxy.ContentType, viaProxy.AcceptContentTypes = "application/json", "application/json"
	configs := map[string]*rest.Config{"direct": direct, "injector": chaos.Configure(env.RESTConfig, inj), "proxy": viaProxy}
	rates := map[string]float64{}
	for _, name := range []string{"direct", "injector", "proxy"} {
		cfg := configs[name]
		cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(b, err)
		b.Run(name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				_, err := client.CoreV1().ConfigMaps(env.Namespace).Get(context.Background(), "c", metav1.GetOptions{})
				require.NoError(b, err)
			}
			rates[name] = float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rates[name], "req/s")
		})
	}
	if rates["direct"] > 0 {
		b.Logf("throughput vs direct: injector %.3f, proxy %.3f", rates["injector"]/rates["direct"], rates["proxy"]/rates["direct"])
	}
}
