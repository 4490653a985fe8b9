package chaos_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	fake.DropErrorBackoff() // the fake-layer tests fail LISTs inside synctest bubbles
	os.Exit(simtest.Main(m))
}

// wire records the requests that reached the server (below the injector).
type wire struct {
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	at     time.Time
	r      chaos.Request
	query  string
	status int // 0 while in flight, or when the request failed
	// expired: the server answered 410, or ended the watch stream with a
	// 410 ERROR frame.
	expired *atomic.Bool
}

func (w *wire) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		r, ok := chaos.ParseRequest(req)
		if !ok {
			return rt.RoundTrip(req)
		}
		// Recorded as it goes out, not when its answer is back: a test that
		// sees the server's state change must also see the request.
		expired := &atomic.Bool{}
		w.mu.Lock()
		i := len(w.seen)
		w.seen = append(w.seen, seenRequest{at: time.Now(), r: r, query: req.URL.RawQuery, expired: expired})
		w.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil {
			w.mu.Lock()
			w.seen[i].status = resp.StatusCode
			w.mu.Unlock()
			expired.Store(resp.StatusCode == http.StatusGone)
			if r.Watch() && resp.StatusCode == http.StatusOK {
				resp.Body = &frameSpy{ReadCloser: resp.Body, expired: expired}
			}
		}
		return resp, err
	})
}

func (w *wire) count(verb, resource string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if s.r.Verb == verb && s.r.Resource == resource {
			n++
		}
	}
	return n
}

// expired counts the requests of resource the server answered with 410.
func (w *wire) expired(resource string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if s.r.Resource == resource && s.expired.Load() {
			n++
		}
	}
	return n
}

// frameSpy notes a 410 ERROR frame in a watch stream as it passes.
type frameSpy struct {
	io.ReadCloser
	expired *atomic.Bool
	buf     []byte
}

func (f *frameSpy) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	f.buf = append(f.buf, p[:n]...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		if frames, decodeErr := chaos.DecodeFrames(f.buf[:i+1]); decodeErr == nil {
			for _, fr := range frames {
				if fr.Type == "ERROR" && bytes.Contains(fr.Object, []byte(`"code":410`)) {
					f.expired.Store(true)
				}
			}
		}
		f.buf = f.buf[i+1:]
	}
	return n, err
}

func (w *wire) all() []seenRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]seenRequest(nil), w.seen...)
}

// lists counts the requests that read the whole collection: an informer's
// initial list and each relist (a LIST, or a watch with initial events).
func (w *wire) lists(resource string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if s.r.Lists() && s.r.Resource == resource {
			n++
		}
	}
	return n
}

func (w *wire) times(verb, resource string) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, s := range w.seen {
		if s.r.Verb == verb && s.r.Resource == resource {
			out = append(out, s.at)
		}
	}
	return out
}

// faulted starts a run on the shared envtest control plane and returns a
// config that goes through plan (above) and a wire recorder (below).
func faulted(t *testing.T, base func(env *sim.Env) *rest.Config, plan chaos.Plan) (*sim.Env, *rest.Config, *wire, *chaos.Log) {
	t.Helper()
	_, env := simtest.RequireRun(t, "chaos-")

	log := &chaos.Log{}
	plan.Recorder = log
	inj, err := chaos.NewInjector(plan)
	require.NoError(t, err)
	w := &wire{}
	cfg := rest.CopyConfig(base(env))
	cfg.Wrap(w.wrap)
	return env, chaos.Configure(cfg, inj), w, log
}

func controllerConfig(env *sim.Env) *rest.Config { return env.ControllerConfig }
func adminConfig(env *sim.Env) *rest.Config      { return env.RESTConfig }

func managed(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{controller.LabelEnabled: controller.ValueEnabled}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
			},
		},
	}
}

// runScaler runs the scaler in-process on cfg until the test ends, limited
// to the run's namespace: the shared control plane still holds other runs'
// Deployments while their namespaces are being deleted.
func runScaler(t *testing.T, cfg *rest.Config, namespace string) {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctl, err := controller.New(controller.Config{Namespace: namespace}, client)
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

func replicas(t *testing.T, env *sim.Env, name string) int32 {
	d, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return *d.Spec.Replicas
}

// The scaler's first write gets 409: it decides again on fresh state and
// writes again; the server saw exactly that second write.
func TestConflictIsFollowedByARecomputedWrite(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, controllerConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Conflict(chaos.Target{Resource: "deployments", Name: "web"}), When: chaos.When{Nth: 1},
	}}})
	runScaler(t, cfg, env.Namespace)
	_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), managed("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return replicas(t, env, "web") == 4 }, time.Minute, 50*time.Millisecond)
	require.Len(t, log.Firings(), 1)
	assert.Equal(t, "answered 409 Conflict", log.Firings()[0].Outcome)
	assert.GreaterOrEqual(t, w.count("patch", "deployments"), 1, "the injected 409 never reached the server; the recomputed write did")
}

// A 429 with Retry-After is retried by client-go's REST client itself, no
// earlier than Retry-After.
func TestThrottledWriteIsRetriedAfterRetryAfter(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, controllerConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Throttle(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}, 2), When: chaos.When{Nth: 1},
	}}})
	runScaler(t, cfg, env.Namespace)
	_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), managed("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return replicas(t, env, "web") == 4 }, time.Minute, 50*time.Millisecond)
	firings := log.Firings()
	require.Len(t, firings, 1)
	// The retry may itself meet a 409 (kube-controller-manager updates the
	// status meanwhile) and be followed by a recomputed write: only the
	// first one that reached the server matters here.
	retries := w.times("patch", "deployments")
	require.NotEmpty(t, retries)
	assert.GreaterOrEqual(t, retries[0].Sub(firings[0].At), 2*time.Second, "not before Retry-After")
}

// informerOn runs a pod informer of the namespace on cfg, recording deletes.
func informerOn(t *testing.T, cfg *rest.Config, ns string) (cache.SharedIndexInformer, chan any) {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	deleted := make(chan any, 10)
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { deleted <- obj }})
	require.NoError(t, err)
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	return inf, deleted
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}}},
	}
}

// A watch that ends with a 410 ERROR frame makes the reflector relist.
func TestWatchExpiredMidStreamForcesARelist(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchExpiredMidStream(chaos.Target{Resource: "pods", Name: "trigger"}), When: chaos.When{Nth: 1},
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	require.Equal(t, 1, w.lists("pods"))

	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("trigger"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.lists("pods") == 2 }, 30*time.Second, 20*time.Millisecond, "relisted")
	require.Len(t, log.Firings(), 1)
	require.Eventually(t, func() bool { _, ok, _ := inf.GetStore().GetByKey(env.Namespace + "/trigger"); return ok }, 10*time.Second, 20*time.Millisecond)
}

// A watch request answered with HTTP 410 makes the reflector list again:
// the informer's first listing watch is refused, and it still syncs through
// a second one, the only one the server saw.
func TestWatchExpiredAtStartForcesARelist(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchExpired(chaos.Target{Resource: "pods"}), When: chaos.When{Nth: 1},
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	assert.True(t, inf.HasSynced())
	require.Len(t, log.Firings(), 1)
	assert.Equal(t, "answered 410 Gone", log.Firings()[0].Outcome)
	assert.Equal(t, 1, w.lists("pods"), "the refused listing never reached the server; the relist did")
}

// A dropped DELETED frame and a relist deliver a tombstone to DeleteFunc.
func TestTombstoneReachesDeleteFunc(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, _, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Tombstone(chaos.Target{Resource: "pods", Name: "victim"}),
	}}})
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("victim"), metav1.CreateOptions{})
	require.NoError(t, err)
	inf, deleted := informerOn(t, cfg, env.Namespace)
	require.Len(t, inf.GetStore().ListKeys(), 1)

	require.NoError(t, env.Observer.CoreV1().Pods(env.Namespace).Delete(context.Background(), "victim", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	select {
	case obj := <-deleted:
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		require.True(t, ok, "DeleteFunc got %T, not a tombstone", obj)
		assert.Equal(t, env.Namespace+"/victim", tomb.Key)
	case <-time.After(30 * time.Second):
		t.Fatal("no delete reached the handler")
	}
	require.Len(t, log.Firings(), 1)
	assert.Equal(t, "dropped, stream ended with 410", log.Firings()[0].Outcome)
}

// A partition fails every request for its window; the informer syncs once
// it ends, and not before.
func TestPartitionDelaysSyncUntilItEnds(t *testing.T) {
	t.Parallel() // a namespace of its own
	const window = 3 * time.Second
	env, cfg, w, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Partition(chaos.Target{}), When: chaos.When{Until: window},
	}}})
	start := time.Now()
	_, _ = informerOn(t, cfg, env.Namespace)
	assert.GreaterOrEqual(t, time.Since(start), window-100*time.Millisecond, "no sync while partitioned")
	assert.NotEmpty(t, log.Firings())
	for _, f := range log.Firings() {
		assert.Contains(t, f.Outcome, "connection refused")
	}
	assert.Equal(t, 1, w.lists("pods"), "only the list after the partition reached the server")
}

// A 503 with Retry-After is retried by the REST client; a 500 without it
// reaches the scaler, whose workqueue retries it. Both converge.
func TestServerErrorsAreRetried(t *testing.T) {
	t.Parallel() // a namespace of its own
	for _, tt := range []struct {
		name  string
		fault chaos.Fault
	}{
		{"503 with Retry-After", chaos.ServerError(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}, 503, 1)},
		{"500 without", chaos.ServerError(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}, 500, 0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, cfg, w, log := faulted(t, controllerConfig, chaos.Plan{Injections: []chaos.Injection{{Fault: tt.fault, When: chaos.When{Count: 2}}}})
			runScaler(t, cfg, env.Namespace)
			_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), managed("web", 2), metav1.CreateOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return replicas(t, env, "web") == 4 }, time.Minute, 50*time.Millisecond)
			assert.Len(t, log.Firings(), 2)
			assert.GreaterOrEqual(t, w.count("patch", "deployments"), 1, "the injected errors never reached the server")
		})
	}
}

// Latency holds the request before it reaches the server.
func TestLatencyDelaysRequests(t *testing.T) {
	t.Parallel() // a namespace of its own
	const delay = 1500 * time.Millisecond
	env, cfg, w, log := faulted(t, controllerConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.Latency(chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}, delay),
	}}})
	runScaler(t, cfg, env.Namespace)
	_, err := env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), managed("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return replicas(t, env, "web") == 4 }, time.Minute, 50*time.Millisecond)
	firings := log.Firings()
	require.NotEmpty(t, firings)
	sent := w.times("patch", "deployments")
	require.NotEmpty(t, sent)
	assert.GreaterOrEqual(t, sent[0].Sub(firings[0].At), delay-10*time.Millisecond)
	assert.Equal(t, "passed on", firings[0].Outcome)
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// A lost frame ends the stream with 410: the informer relists and has the
// object from the relist, though its event never came.
func TestWatchLostIsLearnedFromTheRelist(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, w, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		// Once: the relist may be a watch whose initial events hold the
		// object again.
		Fault: chaos.WatchLost(chaos.Target{Resource: "pods", Name: "lost"}), When: chaos.When{Count: 1},
	}}})
	inf, _ := informerOn(t, cfg, env.Namespace)
	lists := w.lists("pods")
	_, err := env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("lost"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cached(inf, env.Namespace, "lost") }, 30*time.Second, 10*time.Millisecond)
	assert.Greater(t, w.lists("pods"), lists, "the informer relisted")
	require.Len(t, log.Firings(), 1)
	assert.Equal(t, "dropped, stream ended with 410", log.Firings()[0].Outcome)
}

// Stopping a watch while one of its frames is held back returns at once,
// the frame given up: the watcher's Stop holds a lock its receiving
// goroutine wants, so waiting out the delay there would, in a synctest
// bubble, stop virtual time for good.
func TestWatchDelayEndsWithTheWatch(t *testing.T) {
	t.Parallel() // a namespace of its own
	env, cfg, _, log := faulted(t, adminConfig, chaos.Plan{Injections: []chaos.Injection{{
		Fault: chaos.WatchDelay(chaos.Target{Resource: "pods", Name: "held"}, time.Hour),
	}}})
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	w, err := cs.CoreV1().Pods(env.Namespace).Watch(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	_, err = env.Observer.CoreV1().Pods(env.Namespace).Create(context.Background(), pod("held"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(log.Firings()) == 1 }, 30*time.Second, 10*time.Millisecond, "the frame is held")
	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waited for the held frame")
	}
}
