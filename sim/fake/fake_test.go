package fake_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
)

const ns = "converge"

func start(t *testing.T) (*fake.Backend, *sim.Env) {
	t.Helper()
	b, err := fake.New(fake.Config{})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Stop()) })
	return b, env
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}},
		},
	}
}

func rv(t *testing.T, obj metav1.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	require.NoError(t, err, "resourceVersion %q", obj.GetResourceVersion())
	return n
}

func TestResourceVersionsIncreaseOnEveryWrite(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	deploys := env.Observer.AppsV1().Deployments(ns)

	d, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	last := rv(t, d)
	assert.Equal(t, int64(1), d.Generation)
	assert.NotEmpty(t, d.UID)

	for i := range 3 {
		d.Spec.Replicas = ptr.To(int32(i + 2))
		d, err = deploys.Update(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Greater(t, rv(t, d), last)
		last = rv(t, d)
	}
	same, err := deploys.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, last, rv(t, same), "a no-op update changes nothing")

	p, err := env.Observer.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Greater(t, rv(t, p), last, "one counter across kinds")
	assert.Regexp(t, "^web-", p.Name)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
}

// A generated name counts the names made from its generateName, skipping
// one taken: it does not depend on how many other objects were written
// before it, as a count of all writes did, so that concurrent creates of
// other objects leave it alone and a seeded run keeps its names.
func TestGeneratedNamesCountTheirBase(t *testing.T) {
	ctx := context.Background()
	names := func(env *sim.Env, bases ...string) []string {
		var out []string
		for _, base := range bases {
			var p *corev1.Pod
			var err error
			if strings.HasSuffix(base, "-") {
				p, err = env.Observer.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: base}}, metav1.CreateOptions{})
			} else {
				p, err = env.Observer.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: base}}, metav1.CreateOptions{})
			}
			require.NoError(t, err)
			if strings.HasSuffix(base, "-") {
				out = append(out, p.Name)
			}
		}
		return out
	}
	_, one := start(t)
	_, other := start(t)
	first := names(one, "a-", "a-", "b-", "a-")
	second := names(other, "b-", "a-", "c-", "c-", "a-", "a-")
	assert.Equal(t, []string{"a-1", "a-2", "b-1", "a-3"}, first)
	assert.Equal(t, []string{"a-1", "a-2", "a-3"}, []string{second[1], second[4], second[5]}, "the names of a- do not depend on the others'")

	_, taken := start(t)
	assert.Equal(t, []string{"a-1", "a-2", "a-4"}, names(taken, "a-3", "a-", "a-", "a-"), "a name taken is skipped")
}

// A uid is shaped as an API server's (a version 4 UUID), and, like a
// generated name, depends on the object's name and how many objects were
// created under it, not on the other writes: a seeded run keeps its uids
// whatever order concurrent writers took. Objects share no prefix (one
// ended in the store's write count: "uid-pods-12"), and an object made
// again under its name is another uid.
func TestUIDsAreUUIDsOfTheirObject(t *testing.T) {
	ctx := context.Background()
	uids := func(env *sim.Env, names ...string) map[string][]types.UID {
		out := map[string][]types.UID{}
		pods := env.Observer.CoreV1().Pods(ns)
		for _, name := range names {
			if _, err := pods.Get(ctx, name, metav1.GetOptions{}); err == nil {
				require.NoError(t, pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
			}
			p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err)
			out[name] = append(out[name], p.UID)
		}
		return out
	}
	_, one := start(t)
	_, other := start(t)
	first := uids(one, "a", "b", "a")
	second := uids(other, "c", "b", "d", "a", "a")
	assert.Equal(t, first["a"], second["a"], "a's do not depend on the other writes")
	assert.Equal(t, first["b"], second["b"])
	assert.NotEqual(t, first["a"][0], first["a"][1], "a made again is another object")

	seen := map[string]bool{}
	for _, list := range []map[string][]types.UID{first, second} {
		for _, all := range list {
			for _, uid := range all {
				u, err := uuid.Parse(string(uid))
				require.NoError(t, err, "%q is a UUID", uid)
				assert.Equal(t, uuid.Version(4), u.Version())
				assert.Equal(t, uuid.RFC4122, u.Variant())
				seen[string(uid)[:8]] = true
			}
		}
	}
	assert.Len(t, seen, 5, "a, a again, b, c and d: five prefixes")
}

func TestStaleWritesConflict(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	deploys := env.ControllerClient.AppsV1().Deployments(ns)
	d, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	stale := d.DeepCopy()

	d.Labels["team"] = "a"
	_, err = deploys.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)

	stale.Labels["team"] = "b"
	_, err = deploys.Update(ctx, stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "stale update: %v", err)
	status := err.(apierrors.APIStatus).Status()
	assert.Equal(t, metav1.StatusReasonConflict, status.Reason)
	assert.Equal(t, int32(409), status.Code)
	assert.Contains(t, status.Message, "the object has been modified")

	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":5}}`, stale.ResourceVersion)
	_, err = deploys.Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	assert.True(t, apierrors.IsConflict(err), "stale conditional patch: %v", err)

	_, err = deploys.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
	assert.NoError(t, err, "an unconditional patch applies")
	_, err = deploys.Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{})
	assert.NoError(t, err)
	got, err := deploys.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app": "web", "team": "a", "tier": "front"}, got.Labels)
	assert.Equal(t, int32(5), *got.Spec.Replicas)
}

func TestGenerationAndStatusSubresource(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	deploys := env.Observer.AppsV1().Deployments(ns)
	d, err := deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)

	d.Labels["team"] = "a"
	d.Status.Replicas = 7 // ignored: not a status write
	d, err = deploys.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Generation, "metadata changes do not bump the generation")
	assert.Zero(t, d.Status.Replicas, "spec writes do not change status")

	d.Spec.Replicas = ptr.To[int32](3)
	d, err = deploys.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Generation)

	d.Status.ObservedGeneration = 2
	d.Spec.Replicas = ptr.To[int32](9) // ignored: a status write
	d, err = deploys.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Status.ObservedGeneration)
	assert.Equal(t, int32(3), *d.Spec.Replicas, "status writes do not change spec")
	assert.Equal(t, int64(2), d.Generation)

	d, err = deploys.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(3), d.Generation, "a spec patch bumps it too")
}

func TestWatchStartsFromResourceVersion(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	pods := env.Observer.CoreV1().Pods(ns)
	a, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"app": "db"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"moved"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion, LabelSelector: "app=web"})
	require.NoError(t, err)
	defer w.Stop()
	var got []string
	for range 2 {
		e := <-w.ResultChan()
		got = append(got, string(e.Type)+" "+e.Object.(*corev1.Pod).Name)
	}
	assert.Equal(t, []string{"ADDED b", "DELETED b"}, got,
		"only what came after a, of what matches; b leaving the selector is a DELETED")

	_, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "abc"})
	assert.True(t, apierrors.IsBadRequest(err))
}

func TestCompactionExpiresOldWatches(t *testing.T) {
	b, env := start(t)
	ctx := context.Background()
	pods := env.Observer.CoreV1().Pods(ns)
	a, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	b.Compact() // the creation of b is no longer in the history
	_, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	require.True(t, apierrors.IsResourceExpired(err), "got %v", err)
	assert.Equal(t, int32(410), err.(apierrors.APIStatus).Status().Code)

	list, err := pods.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err, "a watch from the current resourceVersion is fine")
	w.Stop()
}

// TestDeleteBetweenListAndWatchIsNotLost deletes a pod after the informer's
// LIST answered and before its WATCH starts: the watch resumes from the
// LIST's resourceVersion, so the informer still sees the delete.
func TestDeleteBetweenListAndWatchIsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, env := start(t)
		ctx := context.Background()
		_, err := env.Observer.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		client, err := b.NewClient()
		require.NoError(t, err)
		var once bool
		client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
			if !once {
				once = true
				require.NoError(t, env.Observer.CoreV1().Pods(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}))
			}
			return false, nil, nil // on to the backend's watch
		})
		deleted := make(chan string, 1)
		informer := informers.NewSharedInformerFactory(client, 0).Core().V1().Pods().Informer()
		_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { deleted <- obj.(*corev1.Pod).Name },
		})
		require.NoError(t, err)
		stop := make(chan struct{})
		go informer.Run(stop)
		defer close(stop)
		synctest.Wait()

		assert.Equal(t, "doomed", <-deleted)
		assert.Empty(t, informer.GetStore().ListKeys())
	})
}

// TestWatchersNeverOverflow writes far more than the fake's 100-event watch
// buffer while an informer reads, and checks every object arrives.
func TestWatchersNeverOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		ctx := context.Background()
		factory := informers.NewSharedInformerFactory(env.ControllerClient, 0)
		informer := factory.Core().V1().ConfigMaps().Informer()
		stop := make(chan struct{})
		factory.Start(stop)
		defer func() { close(stop); factory.Shutdown() }()
		synctest.Wait()

		const n = 2000
		for i := range n {
			_, err := env.Observer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		synctest.Wait()
		assert.Len(t, informer.GetStore().ListKeys(), n)
	})
}

func TestGracefulPodDeletionAndFinalizers(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	pods := env.Observer.CoreV1().Pods(ns)

	_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unbound"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Delete(ctx, "unbound", metav1.DeleteOptions{}))
	_, err = pods.Get(ctx, "unbound", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "an unbound pod goes at once")

	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}))
	err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsConflict(err), "bound once: %v", err)

	require.NoError(t, pods.Delete(ctx, "bound", metav1.DeleteOptions{}))
	p, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	require.NoError(t, err, "a bound pod waits for its kubelet")
	require.NotNil(t, p.DeletionTimestamp)
	assert.Equal(t, int64(30), *p.DeletionGracePeriodSeconds)
	assert.Equal(t, "node-1", p.Spec.NodeName)
	require.NoError(t, pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	_, err = pods.Get(ctx, "bound", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the kubelet's final delete removes it")

	cms := env.Observer.CoreV1().ConfigMaps(ns)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cms.Delete(ctx, "held", metav1.DeleteOptions{}))
	cm, err := cms.Get(ctx, "held", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, cm.DeletionTimestamp)
	cm.Finalizers = nil
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = cms.Get(ctx, "held", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "gone once its finalizers are")
}

func TestStoppedBackendRefuses(t *testing.T) {
	b, env := start(t)
	require.NoError(t, b.Stop())
	_, err := env.Observer.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	assert.True(t, apierrors.IsServiceUnavailable(err))
	assert.NoError(t, b.Stop(), "twice is fine")
}

func TestConfigValidation(t *testing.T) {
	_, err := fake.New(fake.Config{Namespace: "Not Valid"})
	assert.ErrorContains(t, err, "namespace")
	_, err = fake.New(fake.Config{HistoryLimit: -1})
	assert.ErrorContains(t, err, "history limit")
	b, err := fake.New(fake.Config{})
	require.NoError(t, err)
	_, err = b.NewClient()
	assert.ErrorContains(t, err, "not started")
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "converge", env.Namespace)
	assert.True(t, env.Can.Has(sim.VirtualTime))
	assert.ErrorContains(t, env.Can.Missing(sim.APIServerRestart, sim.VirtualTime), "restart-apiserver: no API server to restart")
	_, err = b.Start(context.Background())
	assert.ErrorContains(t, err, "already started")
}

// TestInvalidNamesAreRefused creates objects a real API server refuses with
// 422 Invalid, and checks the fake refuses them too and keeps no trace: no
// object, no watch event, no resourceVersion used.
func TestInvalidNamesAreRefused(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	cs := env.Observer
	list, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := cs.AppsV1().Deployments("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	named := func(ns, name string) *appsv1.Deployment {
		d := deployment(name, 1)
		d.Namespace = ns
		return d
	}
	generated := func(prefix string) *appsv1.Deployment {
		d := deployment("", 1)
		d.GenerateName = prefix
		return d
	}
	for _, c := range []struct {
		obj   *appsv1.Deployment
		field string // the cause the server names
	}{
		{named(ns, "web<-0"), "metadata.name"},
		{named(ns, strings.Repeat("a", 300)), "metadata.name"},
		{named(ns, "Web"), "metadata.name"},
		{named(ns, "web_0"), "metadata.name"},
		{generated("web<-"), "metadata.name"},
		{named("Not_A_Namespace", "web"), "metadata.namespace"},
	} {
		d := c.obj
		_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%q/%q: %v", d.Name, d.GenerateName, err)
		status := err.(apierrors.APIStatus).Status()
		assert.Equal(t, int32(422), status.Code)
		require.NotNil(t, status.Details)
		assert.Equal(t, "apps", status.Details.Group)
		assert.Equal(t, "Deployment", status.Details.Kind)
		var fields []string
		for _, cause := range status.Details.Causes {
			fields = append(fields, cause.Field)
		}
		assert.Contains(t, fields, c.field, "%q/%q: %v", d.Name, d.GenerateName, err)
		if d.Name != "" {
			_, err = cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "%q is not stored: %v", d.Name, err)
		}
	}
	all, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, all.Items, "nothing is stored")
	assert.Equal(t, list.ResourceVersion, all.ResourceVersion, "no resourceVersion is used")

	ok, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	e := <-w.ResultChan()
	assert.Equal(t, watch.Added, e.Type)
	assert.Equal(t, ok.UID, e.Object.(*appsv1.Deployment).UID, "the first event is of the first stored object")
}

// TestNameRulesFollowTheResource: each resource gets the API server's name
// rule, and a long generateName is cut as the server cuts it.
func TestNameRulesFollowTheResource(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	cs := env.Observer

	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{})
	assert.NoError(t, err, "a subdomain may have dots")
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "a namespace name is a label: %v", err)
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "a service name is a label: %v", err)
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "1st"}}, metav1.CreateOptions{})
	assert.NoError(t, err, "a service name may start with a digit since 1.37")
	_, err = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "Web.Started"},
		InvolvedObject: corev1.ObjectReference{Namespace: ns},
	}, metav1.CreateOptions{})
	assert.NoError(t, err, "a core/v1 Event name need only be a path segment")
	_, err = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a/b"},
		InvolvedObject: corev1.ObjectReference{Namespace: ns},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "but it is one: %v", err)

	long := strings.Repeat("n", 62) + "-"
	got, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: long}}, metav1.CreateOptions{})
	require.NoError(t, err, "the server cuts a generateName to fit a label")
	assert.Equal(t, long[:58], got.Name[:58])
	assert.LessOrEqual(t, len(got.Name), 63)

	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "name or generateName is required")
}

// TestClientsetDiscovery: the fake clientset's discovery lists the
// built-in resources, as the server's does.
func TestClientsetDiscovery(t *testing.T) {
	_, env := start(t)
	list, err := env.Observer.Discovery().ServerResourcesForGroupVersion("apps/v1")
	require.NoError(t, err)
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	assert.Contains(t, names, "deployments")
	assert.Contains(t, names, "deployments/scale")
}

// A controller's watch events are its own to change; a sharing client's
// are the API's own objects, one per write, whoever watches.
func TestWatchesCopyUnlessSharing(t *testing.T) {
	b, env := start(t)
	ctx := context.Background()
	sharing1, err := b.NewSharingClient()
	require.NoError(t, err)
	sharing2, err := b.NewSharingClient()
	require.NoError(t, err)
	watchOne := func(c interface {
		AppsV1() appsv1client.AppsV1Interface
	}) watch.Interface {
		w, err := c.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		return w
	}
	another, err := b.NewClient()
	require.NoError(t, err)
	own, other, s1, s2 := watchOne(env.ControllerClient), watchOne(another), watchOne(sharing1), watchOne(sharing2)
	_, err = env.ControllerClient.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	next := func(w watch.Interface) *appsv1.Deployment {
		e := <-w.ResultChan()
		require.Equal(t, watch.Added, e.Type)
		return e.Object.(*appsv1.Deployment)
	}
	mine, theirs, a, b2 := next(own), next(other), next(s1), next(s2)
	assert.Same(t, a, b2, "two sharing watches are handed the same object")
	assert.NotSame(t, mine, a, "a controller's watch gets its own copy")
	assert.NotSame(t, theirs, a, "another client's watch gets its own copy")

	// What the controller does to its copy reaches nobody else.
	mine.Labels["app"] = "changed"
	got, err := sharing1.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "web", got.Labels["app"])
	assert.Equal(t, "web", a.Labels["app"])
}

// An Event named as client-go's recorders name one at this instant, whose
// name is taken, is stored under the next free nanosecond's name; any
// other taken name is refused, an Event's included.
func TestEventsOfOneInstantAreStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		ctx := context.Background()
		events := env.Observer.CoreV1().Events(ns)
		event := func(name string) *corev1.Event {
			return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
				InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "shop"}, Reason: "Made"}
		}
		now := time.Now().UnixNano()
		name := fmt.Sprintf("shop.%x", now)
		var got []string
		for range 3 {
			e, err := events.Create(ctx, event(name), metav1.CreateOptions{})
			require.NoError(t, err)
			got = append(got, e.Name)
		}
		assert.Equal(t, []string{name, fmt.Sprintf("shop.%x", now+1), fmt.Sprintf("shop.%x", now+2)}, got)

		for _, taken := range []string{"shop", fmt.Sprintf("shop.%x", now-5)} {
			_, err := events.Create(ctx, event(taken), metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = events.Create(ctx, event(taken), metav1.CreateOptions{})
			assert.True(t, apierrors.IsAlreadyExists(err), "%s: %v", taken, err)
		}
		// Once the clock has moved on, the name of an earlier instant is
		// taken for good.
		time.Sleep(time.Second)
		_, err := events.Create(ctx, event(name), metav1.CreateOptions{})
		assert.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	})
}
