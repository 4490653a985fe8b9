package world_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/world"
)

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{controller.LabelEnabled: controller.ValueEnabled}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}
}

// startWorld runs a fake backend and a world on it in the current bubble.
func startWorld(t *testing.T, model world.Model) (*sim.Env, *world.World) {
	t.Helper()
	b, err := fake.New(fake.Config{})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	w, _ := runWorld(t, world.Config{
		Client: env.Observer, Namespace: env.Namespace, Readiness: model, Seed: 7,
		Scheduler: true, Deployments: true,
	}, b.Stop)
	settle()
	return env, w
}

// runWorld runs a world on cfg until t ends, then stops the backend with
// stopBackend, failing t on an error of either.
func runWorld(t *testing.T, cfg world.Config, stopBackend func() error) (*world.World, context.Context) {
	t.Helper()
	w, err := world.New(cfg)
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, stopBackend())
	})
	return w, ctx
}

// fakeWithClient starts a fake backend in the current bubble, stopped when
// t ends, and returns it with a client of its own, for reactors.
func fakeWithClient(t *testing.T) (*sim.Env, *k8sfake.Clientset) {
	t.Helper()
	b, err := fake.New(fake.Config{})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Stop()) })
	cs, err := b.NewClient()
	require.NoError(t, err)
	return env, cs
}

// settle lets virtual time run past the cache-sync poll and every
// goroutine go idle.
func settle() {
	time.Sleep(200 * time.Millisecond)
	synctest.Wait()
}

func pods(t *testing.T, c kubernetes.Interface, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	return list.Items
}

func readyCount(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

func TestWorldPlaysDeploymentSchedulerAndKubelet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, w := startWorld(t, world.Model{Kind: world.ReadyAfterDelay, Delay: 5 * time.Second})
		ctx := context.Background()
		deploys := env.Observer.AppsV1().Deployments(env.Namespace)
		require.Len(t, w.Nodes(), 3)

		_, err := deploys.Create(ctx, deployment("web", 3), metav1.CreateOptions{})
		require.NoError(t, err)
		settle()
		ps := pods(t, env.Observer, env.Namespace, "web")
		require.Len(t, ps, 3, "pods follow replicas")
		for _, p := range ps {
			assert.Contains(t, w.Nodes(), p.Spec.NodeName, "bound to a simulated node")
			assert.Equal(t, corev1.PodRunning, p.Status.Phase)
			assert.Equal(t, "web", metav1.GetControllerOf(&p).Name)
		}
		assert.Zero(t, readyCount(ps), "not ready before the model's delay")

		time.Sleep(5 * time.Second)
		settle()
		assert.Equal(t, 3, readyCount(pods(t, env.Observer, env.Namespace, "web")))
		d, err := deploys.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		conditions := d.Status.Conditions
		d.Status.Conditions = nil
		assert.Equal(t, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, TerminatingReplicas: ptr.To[int32](0)}, d.Status)
		require.Len(t, conditions, 2)
		assert.Equal(t, [2]string{"Available", "MinimumReplicasAvailable"}, [2]string{string(conditions[0].Type), conditions[0].Reason})
		assert.Equal(t, [2]string{"Progressing", "NewReplicaSetAvailable"}, [2]string{string(conditions[1].Type), conditions[1].Reason})

		// Scale up, then down: the newest pods go first.
		_, err = deploys.Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		time.Sleep(time.Second) // the new pods are younger
		settle()
		ps = pods(t, env.Observer, env.Namespace, "web")
		require.Len(t, ps, 5)
		sort.Slice(ps, func(i, j int) bool { return ps[i].CreationTimestamp.Before(&ps[j].CreationTimestamp) })
		oldest := []string{ps[0].Name, ps[1].Name}

		_, err = deploys.Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		settle()
		var left []string
		for _, p := range pods(t, env.Observer, env.Namespace, "web") {
			left = append(left, p.Name)
		}
		slices.Sort(left)
		slices.Sort(oldest)
		assert.Equal(t, oldest, left, "the newest were deleted, gracefully, and are gone")
		d, err = deploys.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(2), d.Status.Replicas)
		assert.Equal(t, int64(3), d.Status.ObservedGeneration)

		require.NoError(t, deploys.Delete(ctx, "web", metav1.DeleteOptions{}))
		settle()
		assert.Empty(t, pods(t, env.Observer, env.Namespace, "web"), "pods of a deleted Deployment go")
	})
}

// TestScalerConvergesInTheWorld runs the scaler and the world together in
// virtual time: pods that are never ready make it double up to its max, one
// cooldown apart; pods that turn ready stop it.
func TestScalerConvergesInTheWorld(t *testing.T) {
	for _, tt := range []struct {
		name  string
		model world.Model
		want  int32
	}{
		{"never ready: up to the max", world.Model{Kind: world.NeverReady}, 10},
		{"ready after 10s: one doubling", world.Model{Kind: world.ReadyAfterDelay, Delay: 10 * time.Second}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env, _ := startWorld(t, tt.model)
				ctl, err := controller.New(controller.Config{}, env.ControllerClient)
				require.NoError(t, err)
				_, ctx := ktesting.NewTestContext(t)
				ctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- ctl.Run(ctx) }()
				defer func() { cancel(); require.NoError(t, <-done) }()

				_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(context.Background(), deployment("web", 2), metav1.CreateOptions{})
				require.NoError(t, err)
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				d, err := env.Observer.AppsV1().Deployments(env.Namespace).Get(context.Background(), "web", metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, tt.want, *d.Spec.Replicas)
				assert.Len(t, pods(t, env.Observer, env.Namespace, "web"), int(tt.want), "the world followed")
			})
		})
	}
}

// Another writer (a node controller, kwok) changes each Node between its
// creation and the world's status write: the world reads it again and
// retries, and every Node ends up ready.
func TestNodesSurviveAnotherWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, cs := fakeWithClient(t)
		touched := map[string]bool{}
		cs.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			name := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node).Name
			if a.GetSubresource() == "status" && !touched[name] {
				touched[name] = true
				_, err := env.Observer.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType,
					[]byte(`{"metadata":{"annotations":{"other-writer":"was-here"}}}`), metav1.PatchOptions{})
				require.NoError(t, err)
			}
			return false, nil, nil
		})
		w, err := world.New(world.Config{Client: cs, Namespace: env.Namespace, Nodes: 2, Scheduler: true})
		require.NoError(t, err)
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		settle()
		assert.Len(t, touched, 2, "each Node was written by the other writer first")
		for _, name := range w.Nodes() {
			n, err := env.Observer.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "was-here", n.Annotations["other-writer"])
			require.NotEmpty(t, n.Status.Conditions, name)
			assert.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status, name)
		}
		assert.Len(t, w.Nodes(), 2)
		cancel()
		require.NoError(t, <-done)
	})
}

// A world stopped while it creates its Nodes, its create of one cut short
// after the API server carried it out (as a client whose context ends
// mid-request sees it), leaves no Node behind: on a cluster runs share, a
// Node left there takes the pods of later runs.
func TestStoppedWhileCreatingNodesLeavesNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, cs := fakeWithClient(t)
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		creates := 0
		cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if creates++; creates < 2 {
				return false, nil, nil
			}
			_, err := env.Observer.CoreV1().Nodes().Create(context.Background(), a.(k8stesting.CreateAction).GetObject().(*corev1.Node), metav1.CreateOptions{})
			require.NoError(t, err)
			cancel()
			return true, nil, context.Canceled
		})
		w, err := world.New(world.Config{Client: cs, Namespace: env.Namespace, Nodes: 3, Untainted: true, NodesByStage: true})
		require.NoError(t, err)
		require.NoError(t, w.Run(ctx), "a world stopped while starting")
		assert.Equal(t, 2, creates, "stopped at its second Node")
		nodes, err := env.Observer.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: world.LabelRun + "=" + env.Namespace})
		require.NoError(t, err)
		assert.Empty(t, nodes.Items, "the Node whose create was cut short is deleted too")
	})
}

// A Deployment deleted and created again at once under its name gets pods
// of its own, whatever the world had expected for the one before it.
func TestRecreatedDeploymentGetsPods(t *testing.T) {
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			env, _ := startWorld(t, world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second})
			ctx := context.Background()
			deploys := env.Observer.AppsV1().Deployments(env.Namespace)
			_, err := deploys.Create(ctx, deployment("web", 3), metav1.CreateOptions{})
			require.NoError(t, err)
			// Some rounds recreate before the world has seen the first at
			// all, some while its pods are being made, some after.
			time.Sleep(time.Duration(round%4) * 50 * time.Millisecond)
			synctest.Wait()
			var d *appsv1.Deployment
			for range 3 {
				require.NoError(t, deploys.Delete(ctx, "web", metav1.DeleteOptions{}))
				d, err = deploys.Create(ctx, deployment("web", 3), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			settle()
			time.Sleep(time.Minute)
			settle()
			var owned int
			for _, p := range pods(t, env.Observer, env.Namespace, "web") {
				if metav1.GetControllerOf(&p).UID == d.UID && p.DeletionTimestamp == nil {
					owned++
				}
			}
			assert.Equal(t, 3, owned, "round %d: the last Deployment's pods", round)
			d, err = deploys.Get(ctx, "web", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, int32(3), d.Status.ReadyReplicas, "round %d", round)
		})
	}
}

// killedAtCreate is a client whose first pod create, once the server has
// made the pod, deletes it and lets the world's informer see both events
// before the create returns: a pod killed behind the world's back while
// its create was still on its way back, as a busy machine orders it.
type killedAtCreate struct {
	kubernetes.Interface
	killed *bool
}

func (c killedAtCreate) CoreV1() corev1client.CoreV1Interface {
	return killedAtCreateCore{c.Interface.CoreV1(), c.killed}
}

type killedAtCreateCore struct {
	corev1client.CoreV1Interface
	killed *bool
}

func (c killedAtCreateCore) Pods(ns string) corev1client.PodInterface {
	return killedAtCreatePods{c.CoreV1Interface.Pods(ns), c.killed}
}

type killedAtCreatePods struct {
	corev1client.PodInterface
	killed *bool
}

func (c killedAtCreatePods) Create(ctx context.Context, p *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	out, err := c.PodInterface.Create(ctx, p, opts)
	if err != nil || *c.killed {
		return out, err
	}
	*c.killed = true
	synctest.Wait() // the informer has the pod
	if err := c.PodInterface.Delete(ctx, out.Name, metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	synctest.Wait() // and has seen it go
	return out, nil
}

// A pod whose events (made, then deleted) reach the world before its
// create returns is not waited for: the Deployment gets another.
func TestAPodGoneBeforeItsCreateReturnedIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := fake.New(fake.Config{})
		require.NoError(t, err)
		env, err := b.Start(context.Background())
		require.NoError(t, err)
		killed := false
		runWorld(t, world.Config{
			Client: killedAtCreate{env.Observer, &killed}, Namespace: env.Namespace,
			Readiness: world.Model{Kind: world.ReadyAfterDelay, Delay: time.Second}, Seed: 7,
			Scheduler: true, Deployments: true,
		}, b.Stop)
		settle()
		ctx := context.Background()
		deploys := env.Observer.AppsV1().Deployments(env.Namespace)
		_, err = deploys.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(time.Minute)
		settle()
		require.True(t, killed, "the first pod was killed as its create returned")
		assert.Equal(t, 1, readyCount(pods(t, env.Observer, env.Namespace, "web")), "the Deployment's pods")
		d, err := deploys.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(1), d.Status.AvailableReplicas)
		assert.Equal(t, int32(0), d.Status.UnavailableReplicas)
	})
}
