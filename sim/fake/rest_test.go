package fake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
)

// startREST starts a backend and returns a clientset over its REST door.
func startREST(t *testing.T) (*sim.Env, kubernetes.Interface) {
	t.Helper()
	_, env := start(t)
	require.NotNil(t, env.RESTConfig, "the fake backend has a REST door")
	c, err := kubernetes.NewForConfig(env.RESTConfig)
	require.NoError(t, err)
	return env, c
}

// TestRESTDoorSharesTheStore: what one door writes, the other reads, with
// one resourceVersion counter.
func TestRESTDoorSharesTheStore(t *testing.T) {
	env, c := startREST(t)
	ctx := context.Background()
	d, err := c.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Generation)
	got, err := env.Observer.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, d.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, d.UID, got.UID)

	got.Spec.Replicas = ptr.To[int32](3)
	_, err = env.Observer.AppsV1().Deployments(ns).Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	d.Spec.Replicas = ptr.To[int32](4)
	_, err = c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "a stale update through REST: %v", err)
	status := err.(apierrors.APIStatus).Status()
	assert.Equal(t, int32(http.StatusConflict), status.Code)
	assert.Contains(t, status.Message, "the object has been modified")

	p, err := c.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(5), *p.Spec.Replicas)
	assert.Equal(t, int64(3), p.Generation)

	p.Status.ObservedGeneration = 3
	s, err := c.AppsV1().Deployments(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(3), s.Status.ObservedGeneration)

	require.NoError(t, c.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	_, err = env.Observer.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "deleted through REST, gone for the clientset: %v", err)
}

// TestRESTListPagination pages through a list as client-go's pager does,
// and a continue token still reads the list as it was when it began.
func TestRESTListPagination(t *testing.T) {
	env, c := startREST(t)
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps(ns)
	for i := range 5 {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Len(t, first.Items, 2)
	require.NotEmpty(t, first.Continue)
	assert.Equal(t, []string{"c0", "c1"}, names(first.Items))

	// Written after the first page: not in the pages that follow.
	_, err = env.Observer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c2a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Observer.CoreV1().ConfigMaps(ns).Delete(ctx, "c3", metav1.DeleteOptions{}))

	var rest []string
	next := first.Continue
	for next != "" {
		page, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: next})
		require.NoError(t, err)
		assert.Equal(t, first.ResourceVersion, page.ResourceVersion, "every page is read at the first page's resourceVersion")
		rest = append(rest, names(page.Items)...)
		next = page.Continue
	}
	assert.Equal(t, []string{"c2", "c3", "c4"}, rest)

	all, err := cms.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"c0", "c1", "c2", "c2a", "c4"}, names(all.Items))

	_, err = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: "not-a-token"})
	assert.True(t, apierrors.IsBadRequest(err), "%v", err)
}

func names(cms []corev1.ConfigMap) []string {
	var out []string
	for _, c := range cms {
		out = append(out, c.Name)
	}
	return out
}

// TestRESTInformerSeesEveryChange runs a client-go informer over the REST
// door in a bubble: it lists with watch-list (initial events, then the
// bookmark), then sees what either door writes.
func TestRESTInformerSeesEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, c := startREST(t)
		ctx := context.Background()
		_, err := env.Observer.CoreV1().Pods(ns).Create(ctx, pod("before"), metav1.CreateOptions{})
		require.NoError(t, err)

		var seen []string
		factory := informers.NewSharedInformerFactory(c, 0)
		informer := factory.Core().V1().Pods().Informer()
		_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen = append(seen, "add "+obj.(*corev1.Pod).Name) },
			UpdateFunc: func(_, obj any) { seen = append(seen, "update "+obj.(*corev1.Pod).Name) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				seen = append(seen, "delete "+obj.(*corev1.Pod).Name)
			},
		})
		require.NoError(t, err)
		stop := make(chan struct{})
		factory.Start(stop)
		defer func() { close(stop); factory.Shutdown() }()
		synctest.Wait()
		require.True(t, informer.HasSynced())

		_, err = c.CoreV1().Pods(ns).Create(ctx, pod("after"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = env.Observer.CoreV1().Pods(ns).Patch(ctx, "after", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		require.NoError(t, env.Observer.CoreV1().Pods(ns).Delete(ctx, "before", metav1.DeleteOptions{}))
		synctest.Wait()
		assert.Equal(t, []string{"add before", "add after", "update after", "delete before"}, seen)
	})
}

// TestRESTWatchList is the watch-list contract client-go 0.37 relies on:
// the current objects as ADDED, then a bookmark marking their end.
func TestRESTWatchList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := startREST(t)
		ctx := context.Background()
		for _, name := range []string{"a", "b"} {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
		})
		require.NoError(t, err)
		defer w.Stop()
		var got []string
		for range 3 {
			e := <-w.ResultChan()
			cm := e.Object.(*corev1.ConfigMap)
			got = append(got, string(e.Type)+" "+cm.Name+" "+cm.Annotations[metav1.InitialEventsAnnotationKey])
		}
		assert.Equal(t, []string{"ADDED a ", "ADDED b ", "BOOKMARK  true"}, got)

		_, err = c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
		assert.True(t, apierrors.IsInvalid(err), "watch-list needs resourceVersionMatch=NotOlderThan: %v", err)
	})
}

// TestRESTWatchTimeoutAndExpiry: a watch ends after timeoutSeconds (in
// virtual time); one from a compacted resourceVersion gets a 410 ERROR
// event, as from the watch cache.
func TestRESTWatchTimeoutAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, env := start(t)
		c, err := kubernetes.NewForConfig(env.RESTConfig)
		require.NoError(t, err)
		ctx := context.Background()
		cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		began := time.Now()
		w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, TimeoutSeconds: ptr.To[int64](30)})
		require.NoError(t, err)
		_, open := <-w.ResultChan()
		assert.False(t, open, "the stream ends")
		assert.Equal(t, 30*time.Second, time.Since(began), "after timeoutSeconds")

		_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		b.Compact()
		w, err = c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		require.NoError(t, err)
		e := <-w.ResultChan()
		require.Equal(t, watch.Error, e.Type)
		assert.Equal(t, int32(http.StatusGone), apierrors.FromObject(e.Object).(apierrors.APIStatus).Status().Code)
		w.Stop()
	})
}

// TestRESTBadRequests: what a client gets for requests a server refuses,
// never a panic.
func TestRESTBadRequests(t *testing.T) {
	_, env := start(t)
	hc, err := rest.HTTPClientFor(env.RESTConfig)
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path, contentType, body string
		code                            int
		reason                          metav1.StatusReason
	}{
		{"GET", "/api/v1/namespaces/converge/widgets", "", "", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/example.com/v1/widgets", "", "", 404, metav1.StatusReasonNotFound},
		{"GET", "/nowhere", "", "", 404, metav1.StatusReasonNotFound},
		{"GET", "/api/v1/namespaces/converge/configmaps/missing", "", "", 404, metav1.StatusReasonNotFound},
		{"PUT", "/api/v1/namespaces/converge/configmaps", "application/json", "{}", 405, metav1.StatusReasonMethodNotAllowed},
		{"POST", "/api/v1/namespaces/converge/configmaps", "application/json", "{not json", 400, metav1.StatusReasonBadRequest},
		{"POST", "/api/v1/namespaces/converge/configmaps", "application/json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest},
		{"POST", "/api/v1/namespaces/converge/configmaps", "text/plain", "x", 415, metav1.StatusReasonUnsupportedMediaType},
		{"POST", "/api/v1/namespaces/converge/configmaps", "application/json", `{"metadata":{"name":"Bad Name"}}`, 422, metav1.StatusReasonInvalid},
		{"POST", "/api/v1/namespaces/missing/configmaps", "application/json", `{"metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound},
		{"GET", "/api/v1/namespaces/converge/configmaps?labelSelector=a%3D%3D%3Db", "", "", 400, metav1.StatusReasonBadRequest},
		{"GET", "/api/v1/namespaces/converge/configmaps?fieldSelector=spec.nodeName%3Dx", "", "", 400, metav1.StatusReasonBadRequest},
		{"GET", "/api/v1/namespaces/converge/configmaps?limit=-1", "", "", 400, metav1.StatusReasonBadRequest},
		{"GET", "/api/v1/namespaces/converge/configmaps?resourceVersion=abc", "", "", 400, metav1.StatusReasonBadRequest},
		{"PATCH", "/api/v1/namespaces/converge/configmaps/missing", "application/merge-patch+json", `{}`, 404, metav1.StatusReasonNotFound},
		{"PATCH", "/api/v1/namespaces/converge/configmaps/missing", "application/bogus-patch", `{}`, 415, metav1.StatusReasonUnsupportedMediaType},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, env.RESTConfig.Host+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.code, resp.StatusCode, "%s", data)
			var status metav1.Status
			require.NoError(t, jsonUnmarshal(data, &status), "%s", data)
			assert.Equal(t, "Status", status.Kind)
			assert.Equal(t, tc.reason, status.Reason, "%s", data)
			assert.Equal(t, int32(tc.code), status.Code)
		})
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// TestRESTBodyTooLarge: a body over the API server's 3 MiB limit is a 413,
// read no further.
func TestRESTBodyTooLarge(t *testing.T) {
	_, env := start(t)
	hc, err := rest.HTTPClientFor(env.RESTConfig)
	require.NoError(t, err)
	body := `{"metadata":{"name":"big"},"data":{"k":"` + strings.Repeat("x", 3<<20) + `"}}`
	req, err := http.NewRequest("POST", env.RESTConfig.Host+"/api/v1/namespaces/converge/configmaps", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// TestApplyThroughTheClientset: the typed clientset's Apply reaches the
// same server-side apply as the REST door.
func TestApplyThroughTheClientset(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	cms := env.Observer.CoreV1().ConfigMaps(ns)
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("applied", ns).WithData(map[string]string{"a": "1"}), metav1.ApplyOptions{FieldManager: "mgr-a"})
	require.NoError(t, err)
	assert.Equal(t, "1", cm.Data["a"])
	require.Len(t, cm.ManagedFields, 1)
	assert.Equal(t, "mgr-a", cm.ManagedFields[0].Manager)
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("applied", ns).WithData(map[string]string{"a": "2"}), metav1.ApplyOptions{FieldManager: "mgr-b"})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
}

// TestCustomResourceVersions: a CRD serving two versions stores one and
// answers in the version asked for; deleting the CRD ends its watches.
func TestCustomResourceVersions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, env := start(t)
		ctx := context.Background()
		preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
			return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": preserve}}}}
		}
		crds := apiextensions.NewForConfigOrDie(env.RESTConfig).ApiextensionsV1().CustomResourceDefinitions()
		_, err := crds.Create(ctx, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v2", false)},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		dc := dynamic.NewForConfigOrDie(env.RESTConfig)
		v1 := dc.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}).Namespace(ns)
		v2 := dc.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "things"}).Namespace(ns)
		thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "Thing",
			"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"n": int64(1)}}}
		created, err := v2.Create(ctx, thing, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "example.com/v2", created.GetAPIVersion())
		got, err := v1.Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "example.com/v1", got.GetAPIVersion())
		assert.Equal(t, int64(1), got.Object["spec"].(map[string]any)["n"])

		w, err := v1.Watch(ctx, metav1.ListOptions{ResourceVersion: got.GetResourceVersion()})
		require.NoError(t, err)
		require.NoError(t, crds.Delete(ctx, "things.example.com", metav1.DeleteOptions{}))
		var types []watch.EventType
		for e := range w.ResultChan() {
			types = append(types, e.Type)
		}
		assert.Equal(t, []watch.EventType{watch.Deleted}, types, "the resource's deletion, then the watch ends")
		_, err = v1.Get(ctx, "a", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err))
	})
}
