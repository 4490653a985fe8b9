package webapp_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
	"github.com/converge-lab/converge/internal/crversion"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

// setup is how a run starts the operator.
type setup struct {
	bug webapp.Bug
	// rbac is the folder of the operator's RBAC. Empty means config/rbac.
	rbac string
	// leaderElection turns on leader election on a Lease in the namespace.
	leaderElection bool
	// wrap, if set, wraps the operator's config (for faults).
	wrap func(*rest.Config) *rest.Config
	// failing: the operator is expected to fail (missing RBAC), so its
	// manager may return an error.
	failing bool
	// envtest runs on a real kube-apiserver and kube-controller-manager,
	// in real time, instead of the fake backend.
	envtest bool
}

// run is the operator on a backend, with the world simulator playing the
// scheduler, the kubelet and, on fake, the Deployment controller. On fake
// it runs inside the caller's synctest bubble. Everything it starts stops
// at the end of the test, before the bubble returns.
type run struct {
	t       *testing.T
	ns      string
	admin   client.WithWatch // full rights, for the test's own reads and writes
	meter   *meter           // what the operator asked and was answered
	history *history         // every version of the WebApps and children
	stop    func()           // stops the operator; safe to call twice
	cache   cache.Cache      // the operator's
}

func start(t *testing.T, s setup) *run {
	t.Helper()
	crds := []string{"config/crd"}
	id := sim.Identity{ServiceAccount: "webapp-operator", RBACPaths: []string{cmp.Or(s.rbac, "config/rbac")}}
	var b sim.Backend
	var err error
	if s.envtest {
		b, err = envtest.NewBackendWith(simtest.Require(t), envtest.BackendConfig{Prefix: "webapp-", CRDPaths: crds, Controller: id})
	} else {
		b, err = fake.New(fake.Config{Namespace: "demo", CRDPaths: crds, Controller: id})
	}
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Stop()) })
	ns := env.Namespace

	scheme, err := webapp.NewScheme()
	require.NoError(t, err)
	admin, err := client.NewWithWatch(env.RESTConfig, client.Options{Scheme: scheme})
	require.NoError(t, err)
	r := &run{t: t, ns: ns, admin: admin, meter: &meter{}}
	r.history = record(t, admin, ns)

	w, err := world.New(world.Config{
		Client:    env.Observer,
		Namespace: ns,
		Readiness: world.Model{Kind: world.ReadyAfterDelay, Delay: 2 * time.Second},
		Scheduler: true,
		// Where no kube-controller-manager runs.
		Deployments: !s.envtest,
		Nodes:       3,
		Seed:        1,
	})
	require.NoError(t, err)
	background(t, w.Run, false)

	cfg := rest.CopyConfig(env.ControllerConfig)
	if s.wrap != nil {
		cfg = s.wrap(cfg)
	}
	cfg.Wrap(r.meter.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// controller-runtime before v0.25 can deadlock stopping a
		// controller on its priority queue.
		Controller:       config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(crversion.PriorityQueueStops())},
		Cache:            cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		LeaderElection:   s.leaderElection,
		LeaderElectionID: "webapp-operator",
		// The run's namespace: the Role grants Leases there.
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
	})
	require.NoError(t, err)
	require.NoError(t, webapp.Setup(mgr, webapp.Options{Bug: s.bug}))
	r.stop = background(t, mgr.Start, s.failing)
	r.cache = mgr.GetCache()
	return r
}

// background runs fn until the test ends, or until the returned stop is
// called: it cancels fn's context and waits for fn to return nil (or
// anything, when mayFail).
func background(t *testing.T, fn func(context.Context) error, mayFail bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; !mayFail {
			require.NoError(t, err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// newWebApp is a WebApp of image nginx in the run's namespace, its port
// left to the schema's default.
func (r *run) newWebApp(name string, replicas int32, config map[string]string) *v1alpha1.WebApp {
	return &v1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Spec:       v1alpha1.WebAppSpec{Replicas: ptr.To(replicas), Image: "nginx:1.27", Config: config},
	}
}

// webApp reads a WebApp, with full rights; nil if it does not exist. So do
// deployment, service and configMap.
func (r *run) webApp(name string) *v1alpha1.WebApp       { return get(r, name, &v1alpha1.WebApp{}) }
func (r *run) deployment(name string) *appsv1.Deployment { return get(r, name, &appsv1.Deployment{}) }
func (r *run) service(name string) *corev1.Service       { return get(r, name, &corev1.Service{}) }
func (r *run) configMap(name string) *corev1.ConfigMap   { return get(r, name, &corev1.ConfigMap{}) }

func get[T client.Object](r *run, name string, obj T) T {
	r.t.Helper()
	err := r.admin.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		var none T
		return none
	}
	require.NoError(r.t, err)
	return obj
}

// edit changes a WebApp's spec as a user would: read, change, update,
// again on conflict.
func (r *run) edit(name string, change func(*v1alpha1.WebAppSpec)) {
	r.t.Helper()
	require.NoError(r.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app := r.webApp(name)
		change(&app.Spec)
		return r.admin.Update(context.Background(), app)
	}))
}

// eventually polls cond every 100 ms and fails the test if it does not
// hold within a minute (of virtual time on fake).
func (r *run) eventually(what string, cond func() bool) {
	r.t.Helper()
	require.True(r.t, within(time.Minute, cond), "waited a minute for: %s", what)
}

// within polls cond every 100 ms for up to d (virtual time on fake) and
// says whether it came to hold.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// available: the WebApp exists, its status describes its generation and
// says Available.
func available(app *v1alpha1.WebApp) bool {
	return app != nil && app.Status.ObservedGeneration == app.Generation && conditionTrue(app, v1alpha1.Available)
}

func conditionTrue(app *v1alpha1.WebApp, t string) bool {
	for _, c := range app.Status.Conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// meter records the operator's requests and the status of their answers.
type meter struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	req  chaos.Request
	code int
}

func (c call) String() string { return fmt.Sprintf("%s: %d", c.req, c.code) }

func (m *meter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if parsed, ok := chaos.ParseRequest(req); ok {
			c := call{req: parsed}
			if resp != nil {
				c.code = resp.StatusCode
			}
			m.mu.Lock()
			m.calls = append(m.calls, c)
			m.mu.Unlock()
		}
		return resp, err
	})
}

// where returns the calls that keep says to keep.
func (m *meter) where(keep func(call) bool) []call {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []call
	for _, c := range m.calls {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func (m *meter) forbidden() []call {
	return m.where(func(c call) bool { return c.code == http.StatusForbidden })
}

func (m *meter) writes() []call {
	return m.where(func(c call) bool {
		switch c.req.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			return true
		}
		return false
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// history is every version of the namespace's WebApps, Deployments,
// Services and ConfigMaps that the watches delivered, in order of
// resourceVersion: the fake backend's resourceVersions are one counter for
// all kinds.
type history struct {
	mu       sync.Mutex
	versions []version
}

type version struct {
	kind string
	typ  watch.EventType
	rv   int64
	obj  client.Object
}

func record(t *testing.T, c client.WithWatch, ns string) *history {
	t.Helper()
	h := &history{}
	lists := map[string]client.ObjectList{
		"WebApp":     &v1alpha1.WebAppList{},
		"Deployment": &appsv1.DeploymentList{},
		"Service":    &corev1.ServiceList{},
		"ConfigMap":  &corev1.ConfigMapList{},
	}
	var wg sync.WaitGroup
	var watches []watch.Interface
	t.Cleanup(func() {
		for _, w := range watches {
			w.Stop()
		}
		wg.Wait()
	})
	for kind, list := range lists {
		w, err := c.Watch(context.Background(), list, client.InNamespace(ns))
		require.NoError(t, err)
		watches = append(watches, w)
		wg.Go(func() {
			for e := range w.ResultChan() {
				obj, ok := e.Object.(client.Object)
				if !ok {
					continue
				}
				rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
				if err != nil {
					continue
				}
				h.mu.Lock()
				h.versions = append(h.versions, version{kind: kind, typ: e.Type, rv: rv, obj: obj})
				h.mu.Unlock()
			}
		})
	}
	return h
}
