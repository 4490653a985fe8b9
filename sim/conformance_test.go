package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/cluster"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/world"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

// onEveryBackend runs body on fake (in a synctest bubble), on envtest, on
// the cluster backend through a kubeconfig of envtest's and on a kwokctl
// cluster (in real time), each with a world that plays what the backend
// lacks.
// The body waits with eventually, which is virtual on fake. The columns in
// real time go side by side: each has a namespace or a cluster of its own,
// and the kwok column of one test never meets another's (a test ends with
// its subtests).
func onEveryBackend(t *testing.T, model world.Model, body func(t *testing.T, env *sim.Env)) {
	t.Run("fake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{})
			require.NoError(t, err)
			run(t, b, model, true, body)
		})
	})
	t.Run("envtest", func(t *testing.T) {
		t.Parallel()
		cp := simtest.Require(t)
		b, err := envtest.NewBackend(cp, "conformance-")
		require.NoError(t, err)
		run(t, b, model, false, body)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		// The cluster backend through a kubeconfig of the envtest control
		// plane: the same code path as with kind.
		b, err := cluster.New(cluster.Config{Kubeconfig: envtestKubeconfig(t, "converge-conformance"), NamespacePrefix: "conformance-"})
		require.NoError(t, err)
		run(t, b, model, false, body)
	})
	t.Run("kwok", func(t *testing.T) {
		t.Parallel()
		// A kwokctl cluster: kube-scheduler binds the pods, kwok holds
		// the Nodes' Leases.
		kc := simtest.RequireKwok(t)
		b, err := cluster.New(cluster.Config{Kubeconfig: kc.Kubeconfig(), NamespacePrefix: "conformance-", ControlPlane: kc, Kwok: true})
		require.NoError(t, err)
		run(t, b, model, false, body)
	})
}

// envtestKubeconfig writes a kubeconfig of the shared envtest control
// plane for an administrator named user, for the cluster backend.
func envtestKubeconfig(t *testing.T, user string) string {
	t.Helper()
	cp := simtest.Require(t)
	u, err := cp.AddUser(crenvtest.User{Name: user, Groups: []string{"system:masters"}})
	require.NoError(t, err)
	data, err := u.KubeConfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func run(t *testing.T, b sim.Backend, model world.Model, playDeployments bool, body func(t *testing.T, env *sim.Env)) {
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	kwokNodes := env.Can.Has(sim.KwokNodes)
	w, err := world.New(world.Config{
		Client: env.Observer, Namespace: env.Namespace, Readiness: model,
		Scheduler: !kwokNodes, Untainted: kwokNodes, NodesByStage: kwokNodes, Deployments: playDeployments,
	})
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	observers.Store(t.Name(), observed{env.Observer, env.Namespace})
	defer observers.Delete(t.Name())
	defer func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, b.Stop())
	}()
	body(t, env)
}

// eventually polls cond every 50ms for up to a minute: virtual time on fake,
// real time on envtest.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if !time.Now().Before(deadline) {
			describe(t)
		}
		require.True(t, time.Now().Before(deadline), msg)
		time.Sleep(50 * time.Millisecond)
	}
}

// observers hold each running column's client, by its test's name, for
// describe.
var observers sync.Map

type observed struct {
	client    kubernetes.Interface
	namespace string
}

// describe logs the run's pods and Nodes, so that a wait that timed out
// says what it waited on.
func describe(t *testing.T) {
	t.Helper()
	var observer observed
	for name := t.Name(); ; name = name[:strings.LastIndex(name, "/")] {
		if o, ok := observers.Load(name); ok {
			observer = o.(observed)
			break
		}
		if !strings.Contains(name, "/") {
			return
		}
	}
	ctx := context.Background()
	if pods, err := observer.client.CoreV1().Pods(observer.namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q, phase %s, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		}
	}
	if nodes, err := observer.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			t.Logf("node %s: taints %+v, conditions %d", n.Name, n.Spec.Taints, len(n.Status.Conditions))
		}
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
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

func podsOf(t *testing.T, env *sim.Env, app string) (all, ready int) {
	t.Helper()
	list, err := env.Observer.CoreV1().Pods(env.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		all++
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return all, ready
}

func TestConformanceDeploymentLifecycle(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.ReadyAfterDelay, Delay: 2 * time.Second}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		deploys := env.Observer.AppsV1().Deployments(env.Namespace)
		_, err := deploys.Create(ctx, deployment("web", 3), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, func() bool { all, ready := podsOf(t, env, "web"); return all == 3 && ready == 3 }, "3 pods, ready after the model's delay")
		eventually(t, func() bool {
			d, err := deploys.Get(ctx, "web", metav1.GetOptions{})
			return err == nil && d.Status.ReadyReplicas == 3 && d.Status.ObservedGeneration == d.Generation
		}, "the Deployment's status follows")

		_, err = deploys.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, func() bool { all, ready := podsOf(t, env, "web"); return all == 5 && ready == 5 }, "scaled up, pods follow")

		require.NoError(t, deploys.Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		eventually(t, func() bool { all, _ := podsOf(t, env, "web"); return all == 0 }, "deleted, pods go")
	})
}

func TestConformanceAPISemantics(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		cms := env.Observer.CoreV1().ConfigMaps(env.Namespace)
		first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		require.NoError(t, err)
		defer w.Stop()

		second := first.DeepCopy()
		second.Data = map[string]string{"k": "v"}
		second, err = cms.Update(ctx, second, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Greater(t, mustInt(t, second.ResourceVersion), mustInt(t, first.ResourceVersion), "resourceVersions increase")

		stale := first.DeepCopy()
		stale.Data = map[string]string{"k": "stale"}
		_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
		require.True(t, apierrors.IsConflict(err), "a stale update is a 409: %v", err)

		// On a cluster whose kube-controller-manager publishes the root CA
		// (kwok's), the namespace's kube-root-ca.crt may be created after a:
		// the watch rightly shows it, and it is not what is checked here.
		for {
			select {
			case e := <-w.ResultChan():
				if cm, ok := e.Object.(*corev1.ConfigMap); ok && cm.Name != "a" {
					continue
				}
				assert.Equal(t, watch.Modified, e.Type, "the watch from a's version sees only what came after")
				assert.Equal(t, second.ResourceVersion, e.Object.(*corev1.ConfigMap).ResourceVersion)
			case <-time.After(30 * time.Second):
				t.Fatal("no watch event")
			}
			break
		}
	})
}

// TestConformanceInvalidNames: a name the API server refuses, given or
// generated, is a 422 Invalid whose causes name metadata.name, and nothing
// is stored.
func TestConformanceInvalidNames(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		deploys := env.Observer.AppsV1().Deployments(env.Namespace)
		named := deployment("web", 1) // valid labels, so only the name is wrong
		named.Name = "web<-0"
		generated := deployment("web", 1)
		generated.Name, generated.GenerateName = "", "web<-"
		for _, d := range []*appsv1.Deployment{named, generated} {
			_, err := deploys.Create(ctx, d, metav1.CreateOptions{})
			require.True(t, apierrors.IsInvalid(err), "name %q, generateName %q: %v", d.Name, d.GenerateName, err)
			details := err.(apierrors.APIStatus).Status().Details
			require.NotNil(t, details)
			var fields []string
			for _, c := range details.Causes {
				fields = append(fields, c.Field)
			}
			assert.Contains(t, fields, "metadata.name", "name %q, generateName %q: %v", d.Name, d.GenerateName, err)
		}
		list, err := deploys.List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, list.Items)
	})
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

// TestConformanceEventsOfOneInstant: client-go's event recorders, of
// either API, name an Event from its object's name and the clock's
// nanoseconds. Every Event recorded for an object is stored, also when
// several are recorded in one instant, as in virtual time they are.
func TestConformanceEventsOfOneInstant(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cms := env.Observer.CoreV1().ConfigMaps(env.Namespace)
		var objs []*corev1.ConfigMap
		for _, name := range []string{"recorded", "recorded-by-events"} {
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err)
			cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			objs = append(objs, cm)
		}
		reasons := []string{"First", "Second", "Third"}

		core := record.NewBroadcaster(record.WithContext(ctx))
		defer core.Shutdown()
		core.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: env.Observer.CoreV1().Events(env.Namespace)})
		recorder := core.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "conformance"})
		for _, r := range reasons {
			recorder.Event(objs[0], corev1.EventTypeNormal, r, "recorded "+r)
		}

		eventsAPI := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Observer.EventsV1()})
		defer eventsAPI.Shutdown()
		require.NoError(t, eventsAPI.StartRecordingToSinkWithContext(ctx))
		newRecorder := eventsAPI.NewRecorder(scheme.Scheme, "conformance")
		for _, r := range reasons {
			newRecorder.Eventf(objs[1], nil, corev1.EventTypeNormal, r, "Recording", "recorded %s", r)
		}

		eventually(t, func() bool {
			l, err := env.Observer.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(slices.DeleteFunc(l.Items, func(e corev1.Event) bool { return e.InvolvedObject.Name != objs[0].Name })) == len(reasons)
		}, "every core/v1 Event recorded is stored")
		eventually(t, func() bool {
			l, err := env.Observer.EventsV1().Events(env.Namespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(slices.DeleteFunc(l.Items, func(e eventsv1.Event) bool { return e.Regarding.Name != objs[1].Name })) == len(reasons)
		}, "every events.k8s.io Event recorded is stored")
	})
}
