package fake_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/internal/crversion"
	"github.com/converge-lab/converge/sim"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// installWidgets creates the widgets.example.com CRD through the REST door.
func installWidgets(t *testing.T, env *sim.Env) {
	t.Helper()
	preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": preserve, "status": preserve},
				}},
			}},
		},
	}
	_, err := apiextensions.NewForConfigOrDie(env.RESTConfig).ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
}

func newWidget(name string, replicas int64) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	w.SetGroupVersionKind(widgetGVK)
	w.SetName(name)
	w.SetNamespace(ns)
	return w
}

const cleanup = "example.com/cleanup"

// widgetReconciler owns a ConfigMap per Widget holding its replicas,
// reports them in status.ready, and deletes the ConfigMap behind a
// finalizer: what a typical operator does.
type widgetReconciler struct{ c client.Client }

func (r *widgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.c.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.GetName() + "-config", Namespace: w.GetNamespace()}}
	if w.GetDeletionTimestamp() != nil {
		if err := r.c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(w, cleanup)
		return ctrl.Result{}, r.c.Update(ctx, w)
	}
	if controllerutil.AddFinalizer(w, cleanup) {
		if err := r.c.Update(ctx, w); err != nil {
			return ctrl.Result{}, err
		}
	}
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	if _, err := controllerutil.CreateOrUpdate(ctx, r.c, cm, func() error {
		cm.Data = map[string]string{"replicas": fmt.Sprint(replicas)}
		return controllerutil.SetControllerReference(w, cm, r.c.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if ready, _, _ := unstructured.NestedInt64(w.Object, "status", "ready"); ready != replicas || !hasStatus(w) {
		if err := unstructured.SetNestedField(w.Object, replicas, "status", "ready"); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.c.Status().Update(ctx, w)
	}
	return ctrl.Result{}, nil
}

func hasStatus(w *unstructured.Unstructured) bool { _, ok := w.Object["status"]; return ok }

// TestControllerRuntimeManagerOnTheRESTDoor runs a controller-runtime
// manager reconciling a CRD in a synctest bubble, through the chaos HTTP
// layer as on a real server: its first Widget update gets a 409, and its
// ConfigMap watch a 410 mid-stream. It converges all the same, and its
// ConfigMap informer visibly recovers: a child deleted behind its back
// after the 410 is recreated.
func TestControllerRuntimeManagerOnTheRESTDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		installWidgets(t, env)
		log := &chaos.Log{}
		inj, err := chaos.NewInjector(chaos.Plan{Seed: 1, Recorder: log, Injections: []chaos.Injection{
			{Fault: chaos.Conflict(chaos.Target{Verbs: []string{"update"}, Resource: "widgets"}), When: chaos.When{Nth: 1}},
			{Fault: chaos.WatchExpiredMidStream(chaos.Target{Resource: "configmaps"}), When: chaos.When{Count: 1}},
		}})
		require.NoError(t, err)
		cfg := chaos.Configure(env.ControllerConfig, inj)

		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// controller-runtime before v0.25 can deadlock stopping a
			// controller on its priority queue.
			Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(crversion.PriorityQueueStops())},
		})
		require.NoError(t, err)
		owner := &unstructured.Unstructured{}
		owner.SetGroupVersionKind(widgetGVK)
		require.NoError(t, ctrl.NewControllerManagedBy(mgr).For(owner).Owns(&corev1.ConfigMap{}).Complete(&widgetReconciler{c: mgr.GetClient()}))
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()

		admin := dynamic.NewForConfigOrDie(env.RESTConfig).Resource(widgetGVK.GroupVersion().WithResource("widgets")).Namespace(ns)
		_, err = admin.Create(context.Background(), newWidget("a", 2), metav1.CreateOptions{})
		require.NoError(t, err)
		waitFor(t, "status.ready is 2 and the ConfigMap holds 2", func() bool {
			return ready(t, admin, "a") == 2 && configMap(t, env, "a-config") == "2"
		})
		got, err := admin.Get(context.Background(), "a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{cleanup}, got.GetFinalizers())

		fired := map[string]int{}
		for _, f := range log.Firings() {
			fired[f.Fault]++
		}
		assert.Equal(t, 1, fired["conflict"], "the 409 fired: %v", log.Firings())
		waitFor(t, "the 410 fired", func() bool {
			for _, f := range log.Firings() {
				if f.Fault == "watch-expired-mid-stream" {
					return true
				}
			}
			return false
		})

		// After the 410: a delete behind the controller's back is seen.
		require.NoError(t, env.Observer.CoreV1().ConfigMaps(ns).Delete(context.Background(), "a-config", metav1.DeleteOptions{}))
		waitFor(t, "the ConfigMap is recreated", func() bool { return configMap(t, env, "a-config") == "2" })

		require.NoError(t, admin.Delete(context.Background(), "a", metav1.DeleteOptions{}))
		waitFor(t, "the Widget and its ConfigMap go", func() bool {
			_, err := admin.Get(context.Background(), "a", metav1.GetOptions{})
			return apierrors.IsNotFound(err) && configMap(t, env, "a-config") == ""
		})
	})
}

// waitFor polls cond every 100 ms of virtual time for a virtual minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited a minute for: %s", what)
		time.Sleep(100 * time.Millisecond)
	}
}

func ready(t *testing.T, c dynamic.ResourceInterface, name string) int64 {
	w, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return -1
	}
	require.NoError(t, err)
	n, _, _ := unstructured.NestedInt64(w.Object, "status", "ready")
	return n
}

func configMap(t *testing.T, env *sim.Env, name string) string {
	cm, err := env.Observer.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return cm.Data["replicas"]
}

// TestDynamicInformerOnACustomResource: a dynamic informer over the REST
// door sees a custom resource created, updated and deleted.
func TestDynamicInformerOnACustomResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		installWidgets(t, env)
		dc := dynamic.NewForConfigOrDie(env.RESTConfig)
		gvr := widgetGVK.GroupVersion().WithResource("widgets")
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
		informer := factory.ForResource(gvr).Informer()
		var seen []string
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen = append(seen, "add "+obj.(*unstructured.Unstructured).GetName()) },
			UpdateFunc: func(_, obj any) { seen = append(seen, "update "+obj.(*unstructured.Unstructured).GetName()) },
			DeleteFunc: func(obj any) { seen = append(seen, "delete "+obj.(*unstructured.Unstructured).GetName()) },
		})
		require.NoError(t, err)
		stop := make(chan struct{})
		factory.Start(stop)
		defer func() { close(stop); factory.Shutdown() }()
		synctest.Wait()

		ctx := context.Background()
		widgets := dc.Resource(gvr).Namespace(ns)
		w, err := widgets.Create(ctx, newWidget("a", 1), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(w.Object, int64(2), "spec", "replicas"))
		_, err = widgets.Update(ctx, w, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, widgets.Delete(ctx, "a", metav1.DeleteOptions{}))
		synctest.Wait()
		assert.Equal(t, []string{"add a", "update a", "delete a"}, seen)
	})
}
