package mirror_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
	"github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
)

const ns = "demo"

// testEnv is the fake backend with the mirror CRD and RBAC installed, and
// administrator clients for the test's own reads and writes. Call it
// inside a synctest bubble: everything it starts is stopped by t.Cleanup.
type testEnv struct {
	t       *testing.T
	env     *sim.Env
	kube    kubernetes.Interface
	mirrors versioned.Interface
}

func start(t *testing.T) *testEnv {
	t.Helper()
	b, err := fake.New(fake.Config{
		Namespace: ns,
		CRDPaths:  []string{"config/crd"},
		Controller: sim.Identity{
			ServiceAccount: "mirror-controller",
			RBACPaths:      []string{"config/rbac"},
		},
	})
	require.NoError(t, err)
	env, err := b.Start(t.Context())
	require.NoError(t, err)
	// Registered first, so it runs after every instance has stopped.
	t.Cleanup(func() { assert.NoError(t, b.Stop()) })
	return &testEnv{
		t:       t,
		env:     env,
		kube:    kubernetes.NewForConfigOrDie(env.RESTConfig),
		mirrors: versioned.NewForConfigOrDie(env.RESTConfig),
	}
}

// instance is one running controller, acting as its ServiceAccount.
type instance struct {
	ctl       *mirror.Controller
	forbidden atomic.Int64 // 403 answers: a verb the Role lacks
	writes    atomic.Int64 // writes other than to Leases
	firings   chaos.Log    // the faults that fired

	mu   sync.Mutex
	used map[permission]bool // what its requests needed the Role to grant

	// wantErr is what Run is expected to return; nil means nil.
	wantErr error

	cancel context.CancelFunc
	exited chan struct{} // closed when Run has returned err
	err    error
}

// run starts a controller with cfg (its namespace filled in) whose requests
// meet faults. It is stopped, and its 403 count checked, on cleanup.
func (e *testEnv) run(cfg mirror.Config, faults ...chaos.Injection) *instance {
	e.t.Helper()
	cfg.Namespace = ns
	inst := &instance{exited: make(chan struct{})}
	rc := e.env.ControllerConfig
	if len(faults) > 0 {
		inj, err := chaos.NewInjector(chaos.Plan{Seed: 1, Injections: faults, Recorder: &inst.firings})
		require.NoError(e.t, err)
		rc = chaos.Configure(rc, inj)
	}
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &counter{next: rt, inst: inst} })

	ctl, err := mirror.New(cfg, kubernetes.NewForConfigOrDie(rc), versioned.NewForConfigOrDie(rc))
	require.NoError(e.t, err)
	inst.ctl = ctl
	_, ctx := ktesting.NewTestContext(e.t)
	ctx, inst.cancel = context.WithCancel(ctx)
	go func() {
		defer close(inst.exited)
		inst.err = ctl.Run(ctx)
	}()
	e.t.Cleanup(func() {
		if err := inst.stop(); inst.wantErr != nil {
			assert.ErrorIs(e.t, err, inst.wantErr)
		} else {
			assert.NoError(e.t, err)
		}
		assert.Zero(e.t, inst.forbidden.Load(), "requests the Role does not allow")
	})
	return inst
}

// stop ends Run and returns its error; Run has stopped everything it
// started by then.
func (i *instance) stop() error {
	i.cancel()
	<-i.exited
	return i.err
}

// returned reports whether Run has returned.
func (i *instance) returned() bool {
	select {
	case <-i.exited:
		return true
	default:
		return false
	}
}

// counter counts an instance's forbidden requests and its writes, and
// records the permissions its requests needed.
type counter struct {
	next http.RoundTripper
	inst *instance
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases") {
		c.inst.writes.Add(1)
	}
	if r, ok := chaos.ParseRequest(req); ok {
		c.inst.use(r)
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusForbidden {
		c.inst.forbidden.Add(1)
	}
	return resp, err
}

// permission is one verb on one resource, as an RBAC rule grants it.
type permission struct{ group, resource, verb string }

func (i *instance) use(r chaos.Request) {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.used == nil {
		i.used = map[permission]bool{}
	}
	i.used[permission{r.Group, res, r.Verb}] = true
	if r.Lists() {
		// A watch that streams the current state first stands for the
		// list it replaces, which the reflector falls back to.
		i.used[permission{r.Group, res, "list"}] = true
	}
}

func (i *instance) permissions() map[permission]bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return maps.Clone(i.used)
}

// eventually polls cond every 100ms of virtual time, for at most limit.
func eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// waitFor fails the test unless cond holds within a virtual minute.
func (e *testEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	require.True(e.t, eventually(time.Minute, cond), "timed out waiting until %s", what)
}

// idle waits until inst has an empty queue, no reconcile running and has
// finished none for a second of virtual time: no retry or echo of its own
// writes is pending.
func (e *testEnv) idle(inst *instance) {
	e.t.Helper()
	last, since := int64(-1), time.Now()
	e.waitFor("the controller is idle", func() bool {
		depth, busy, n := inst.ctl.Probe()
		if depth > 0 || busy || n != last {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= time.Second
	})
}

func (e *testEnv) createConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	return cm
}

func (e *testEnv) setData(name string, data map[string]string) *corev1.ConfigMap {
	e.t.Helper()
	cm := e.configMap(name)
	require.NotNil(e.t, cm, "configmap %s", name)
	cm.Data = data
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(e.t, err)
	return cm
}

// configMap is the stored ConfigMap, or nil when there is none.
func (e *testEnv) configMap(name string) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	return cm
}

func (e *testEnv) gone(name string) func() bool {
	return func() bool { return e.configMap(name) == nil }
}

// holds reports whether every named ConfigMap exists with data.
func (e *testEnv) holds(data map[string]string, names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			cm := e.configMap(n)
			if cm == nil || !equalData(cm.Data, data) {
				return false
			}
		}
		return true
	}
}

func equalData(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func newMirror(name, source string, targets ...string) *v1alpha1.Mirror {
	return &v1alpha1.Mirror{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.MirrorSpec{Source: source, Targets: targets},
	}
}

func (e *testEnv) createMirror(name, source string, targets ...string) *v1alpha1.Mirror {
	e.t.Helper()
	m, err := e.mirrors.ExamplesV1alpha1().Mirrors(ns).Create(context.Background(), newMirror(name, source, targets...), metav1.CreateOptions{})
	require.NoError(e.t, err)
	return m
}

func (e *testEnv) mirror(name string) *v1alpha1.Mirror {
	e.t.Helper()
	m, err := e.mirrors.ExamplesV1alpha1().Mirrors(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	return m
}

// setTargets updates the Mirror's spec, again on a 409: the controller
// writes its status meanwhile.
func (e *testEnv) setTargets(name string, targets ...string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := e.mirror(name)
		m.Spec.Targets = targets
		_, err := e.mirrors.ExamplesV1alpha1().Mirrors(ns).Update(context.Background(), m, metav1.UpdateOptions{})
		return err
	})
	require.NoError(e.t, err)
}

// syncedCondition is the Mirror's Synced condition, or nil.
func (e *testEnv) syncedCondition(name string) *metav1.Condition {
	return meta.FindStatusCondition(e.mirror(name).Status.Conditions, v1alpha1.ConditionSynced)
}

// reports holds when the Mirror's status describes its current generation
// and the source at sourceVersion, with n targets synced and the Synced
// condition at status for reason.
func (e *testEnv) reports(name, sourceVersion string, n int32, status metav1.ConditionStatus, reason string) func() bool {
	return func() bool {
		m := e.mirror(name)
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionSynced)
		return m.Status.ObservedGeneration == m.Generation &&
			m.Status.SourceResourceVersion == sourceVersion &&
			m.Status.SyncedTargets == n &&
			c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == m.Generation
	}
}

func (e *testEnv) leaseHolder() string {
	l, err := e.kube.CoordinationV1().Leases(ns).Get(context.Background(), mirror.DefaultLeaseName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}
