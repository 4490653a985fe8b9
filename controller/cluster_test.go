package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/controller"
)

const ns = "default"

var deploymentsGVR = appsv1.SchemeGroupVersion.WithResource("deployments")

// cluster is a fake clientset with the API server semantics the scaler
// relies on: a resourceVersion on every write, 409 on a write that carries a
// stale one, and metadata.generation bumped on Deployment spec changes.
type cluster struct {
	t  testing.TB
	cs *fake.Clientset
	rv atomic.Int64

	mu sync.Mutex
	// beforePatch, when set, runs before a Deployment patch is applied; an
	// error it returns is the patch's answer.
	beforePatch func(name string, patch []byte) error
	patches     []patchCall
	landed      atomic.Int64 // patches that succeeded
}

type patchCall struct {
	Name  string
	Patch []byte
	Err   error
}

// newCluster starts from NewSimpleClientset, not NewClientset: the latter's
// field-managed tracker builds a REST mapper on every call, which made the
// fake, not the scaler, the subject of the benchmarks.
func newCluster(t testing.TB, objs ...runtime.Object) *cluster {
	//lint:ignore SA1019 deprecated in client-go v0.35 only, kept in v0.36 and v0.37
	c := &cluster{t: t, cs: fake.NewSimpleClientset()}
	c.cs.PrependReactor("create", "*", c.stamp)
	c.cs.PrependReactor("update", "*", c.stamp)
	c.cs.PrependReactor("patch", "deployments", c.patchDeployment)
	c.bufferWatches()
	for _, o := range objs {
		c.create(o)
	}
	return c
}

func (c *cluster) nextRV() string { return strconv.FormatInt(c.rv.Add(1), 10) }

// stamp sets the resourceVersion of created and updated objects, and answers
// 409 to an update that carries a stale one.
func (c *cluster) stamp(action k8stesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(interface{ GetObject() runtime.Object }) // create and update
	if !ok {
		return false, nil, nil
	}
	obj := a.GetObject()
	m, err := metaOf(obj)
	if err != nil {
		return true, nil, err
	}
	if action.GetVerb() == "update" {
		stored, err := c.cs.Tracker().Get(action.GetResource(), action.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		storedMeta, err := metaOf(stored)
		if err != nil {
			return true, nil, err
		}
		if m.GetResourceVersion() != "" && m.GetResourceVersion() != storedMeta.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), m.GetName(),
				fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		d, isDeployment := obj.(*appsv1.Deployment)
		if isDeployment && action.GetSubresource() == "" && !apiequality.Semantic.DeepEqual(d.Spec, stored.(*appsv1.Deployment).Spec) {
			d.Generation = storedMeta.GetGeneration() + 1
		}
	}
	m.SetResourceVersion(c.nextRV())
	return false, nil, nil // the default reactor stores it
}

func (c *cluster) patchDeployment(action k8stesting.Action) (bool, runtime.Object, error) {
	a := action.(k8stesting.PatchAction)
	c.mu.Lock()
	hook := c.beforePatch
	c.mu.Unlock()
	err := func() error {
		if a.GetPatchType() != types.MergePatchType {
			return apierrors.NewBadRequest("unsupported patch type " + string(a.GetPatchType()))
		}
		if hook != nil {
			if err := hook(a.GetName(), a.GetPatch()); err != nil {
				return err
			}
		}
		return nil
	}()
	var out *appsv1.Deployment
	if err == nil {
		out, err = c.applyPatch(a.GetNamespace(), a.GetName(), a.GetPatch())
	}
	c.mu.Lock()
	c.patches = append(c.patches, patchCall{Name: a.GetName(), Patch: a.GetPatch(), Err: err})
	c.mu.Unlock()
	if err == nil {
		c.landed.Add(1)
	}
	if err != nil {
		return true, nil, err
	}
	return true, out, nil
}

func (c *cluster) applyPatch(namespace, name string, patch []byte) (*appsv1.Deployment, error) {
	obj, err := c.cs.Tracker().Get(deploymentsGVR, namespace, name)
	if err != nil {
		return nil, err
	}
	stored := obj.(*appsv1.Deployment)
	var precondition struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &precondition); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if rv := precondition.Metadata.ResourceVersion; rv != "" && rv != stored.ResourceVersion {
		return nil, apierrors.NewConflict(deploymentsGVR.GroupResource(), name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	orig, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(orig, patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out := &appsv1.Deployment{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if !apiequality.Semantic.DeepEqual(out.Spec, stored.Spec) {
		out.Generation = stored.Generation + 1
	}
	out.ResourceVersion = c.nextRV()
	if err := c.cs.Tracker().Update(deploymentsGVR, out, namespace); err != nil {
		return nil, err
	}
	return out, nil
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

func (c *cluster) create(obj runtime.Object) {
	c.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Generation == 0 {
			o.Generation = 1
			o.Status.ObservedGeneration = 1
		}
		_, err = c.cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = c.cs.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unsupported object %T", obj)
	}
	require.NoError(c.t, err)
}

func (c *cluster) deployment(name string) (*appsv1.Deployment, error) {
	obj, err := c.cs.Tracker().Get(deploymentsGVR, ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.Deployment), nil
}

func (c *cluster) replicas(name string) int32 {
	c.t.Helper()
	d, err := c.deployment(name)
	require.NoError(c.t, err)
	return *d.Spec.Replicas
}

// observe plays the Deployment controller: status catches up with the spec.
func (c *cluster) observe(name string) {
	c.t.Helper()
	d, err := c.deployment(name)
	require.NoError(c.t, err)
	d = d.DeepCopy()
	d.Status.ObservedGeneration = d.Generation
	d.Status.Replicas = *d.Spec.Replicas
	_, err = c.cs.AppsV1().Deployments(ns).UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(c.t, err)
}

// updateDeployment applies mutate to the stored Deployment through the API,
// as a second writer would.
func (c *cluster) updateDeployment(name string, mutate func(*appsv1.Deployment)) {
	c.t.Helper()
	d, err := c.deployment(name)
	require.NoError(c.t, err)
	d = d.DeepCopy()
	mutate(d)
	_, err = c.cs.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(c.t, err)
}

func (c *cluster) setReady(podName string, ready bool) {
	c.t.Helper()
	p, err := c.cs.CoreV1().Pods(ns).Get(context.Background(), podName, metav1.GetOptions{})
	require.NoError(c.t, err)
	p.Status.Conditions = readyConditions(ready)
	_, err = c.cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(c.t, err)
}

func (c *cluster) patchCalls() []patchCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]patchCall(nil), c.patches...)
}

// successfulPatches counts the scaler's Deployment writes that landed.
func (c *cluster) successfulPatches() int { return int(c.landed.Load()) }

func (c *cluster) setBeforePatch(f func(name string, patch []byte) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beforePatch = f
}

// events lists the Events recorded in the fake API with the given reason.
func (c *cluster) events(reason string) []corev1.Event {
	c.t.Helper()
	list, err := c.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(c.t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

type deployOpt func(*appsv1.Deployment)

func withMax(v string) deployOpt {
	return func(d *appsv1.Deployment) { d.Annotations[controller.AnnotationMaxReplicas] = v }
}

func unlabelled() deployOpt {
	return func(d *appsv1.Deployment) { delete(d.Labels, controller.LabelEnabled) }
}

func withSelector(s *metav1.LabelSelector) deployOpt {
	return func(d *appsv1.Deployment) { d.Spec.Selector = s }
}

func nilReplicas() deployOpt {
	return func(d *appsv1.Deployment) { d.Spec.Replicas = nil }
}

func deployment(name string, replicas int32, opts ...deployOpt) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{controller.LabelEnabled: controller.ValueEnabled},
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// pods returns n pods of the Deployment app, the first ready of them ready.
func pods(app string, n, ready int) []runtime.Object {
	var out []runtime.Object
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", app, i), app, i < ready))
	}
	return out
}

func pod(name, app string, ready bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: readyConditions(ready)},
	}
}

func readyConditions(ready bool) []corev1.PodCondition {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	return []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
}

func objects(groups ...[]runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// metric reads a counter or gauge from a registry; labels pick the series.
func metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

func matchLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// hookedClient wraps a clientset so one instance's Deployment patches pass
// through a hook: it attributes writes to an instance and can make them slow.
type hookedClient struct {
	kubernetes.Interface
	onPatch func(ctx context.Context, name string) error
}

// IsWatchListSemanticsUnSupported forwards the fake clientset's opt-out of
// streaming lists: a wrapper that hides it leaves reflectors waiting for a
// bookmark the fake never sends.
func (h hookedClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(h.Interface)
}

func (h hookedClient) AppsV1() appsv1client.AppsV1Interface {
	return hookedApps{AppsV1Interface: h.Interface.AppsV1(), onPatch: h.onPatch}
}

type hookedApps struct {
	appsv1client.AppsV1Interface
	onPatch func(ctx context.Context, name string) error
}

func (h hookedApps) Deployments(namespace string) appsv1client.DeploymentInterface {
	return hookedDeployments{DeploymentInterface: h.AppsV1Interface.Deployments(namespace), onPatch: h.onPatch}
}

type hookedDeployments struct {
	appsv1client.DeploymentInterface
	onPatch func(ctx context.Context, name string) error
}

func (h hookedDeployments) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*appsv1.Deployment, error) {
	if err := h.onPatch(ctx, name); err != nil {
		return nil, err
	}
	return h.DeploymentInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
