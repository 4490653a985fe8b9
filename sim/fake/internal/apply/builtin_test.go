package apply

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

const deployHead = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns
`

const deploySpec = `spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: nginx}]
`

// aliceApply is a full Deployment; aliceFields is what a real server records
// for it.
const (
	aliceApply  = deployHead + "  labels: {team: a}\n" + deploySpec
	aliceFields = `{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:replicas":{},"f:selector":{},` +
		`"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	aliceFieldsNoReplicas = `{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:selector":{},` +
		`"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	replicasFields = `{"f:spec":{"f:replicas":{}}}`
)

func replicasApply(n string) string { return deployHead + "spec:\n  replicas: " + n + "\n" }

func newDeployment() runtime.Object { return &appsv1.Deployment{} }

func deploymentOf(t *testing.T, obj runtime.Object) *appsv1.Deployment {
	t.Helper()
	d, ok := obj.(*appsv1.Deployment)
	require.True(t, ok, "got %T", obj)
	return d
}

func TestDeployment(t *testing.T) {
	setReplicas := func(n int32) func(runtime.Object) {
		return func(obj runtime.Object) { obj.(*appsv1.Deployment).Spec.Replicas = ptr.To(n) }
	}
	tests := []struct {
		name  string
		steps []step
		check func(t *testing.T, obj runtime.Object)
	}{{
		name:  "apply creates",
		steps: []step{{manager: "alice", patch: aliceApply}},
		check: func(t *testing.T, obj runtime.Object) {
			d := deploymentOf(t, obj)
			assert.Equal(t, int32(2), *d.Spec.Replicas)
			assert.Equal(t, "web", d.Name)
			assert.Equal(t, map[string]string{"team": "a"}, d.Labels)
			assert.Equal(t, []string{"alice/Apply/apps/v1/"}, managers(t, obj))
			assert.JSONEq(t, aliceFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
			assert.NotNil(t, deploymentOf(t, obj).ManagedFields[0].Time)
		},
	}, {
		name: "a second apply by the same manager changes a field",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "alice", patch: strings.Replace(aliceApply, "replicas: 2", "replicas: 5", 1)},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int32(5), *deploymentOf(t, obj).Spec.Replicas)
			assert.Equal(t, []string{"alice/Apply/apps/v1/"}, managers(t, obj))
			assert.JSONEq(t, aliceFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "another manager's apply of an owned field conflicts",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "bob", patch: replicasApply("3"), wantCode: 409, wantCauses: []metav1.StatusCause{conflict(".spec.replicas", `"alice"`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int32(2), *deploymentOf(t, obj).Spec.Replicas)
			assert.Equal(t, []string{"alice/Apply/apps/v1/"}, managers(t, obj))
		},
	}, {
		name: "the same value applied by another manager is shared, not a conflict",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "bob", patch: replicasApply("2")},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.JSONEq(t, aliceFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
			assert.JSONEq(t, replicasFields, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
			// As on the server, an apply that changes nothing records no time.
			for _, e := range deploymentOf(t, obj).ManagedFields {
				assert.Equal(t, e.Manager == "bob", e.Time == nil, e.Manager)
			}
		},
	}, {
		name: "force takes ownership",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "bob", patch: replicasApply("3"), force: true},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int32(3), *deploymentOf(t, obj).Spec.Replicas)
			assert.JSONEq(t, replicasFields, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
			assert.JSONEq(t, aliceFieldsNoReplicas, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "an update by a non-apply manager, then an apply conflicts",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "hpa", write: setReplicas(7)},
			{manager: "alice", patch: aliceApply, wantCode: 409, wantCauses: []metav1.StatusCause{conflict(".spec.replicas", `"hpa" using apps/v1`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int32(7), *deploymentOf(t, obj).Spec.Replicas)
			assert.Equal(t, []string{"alice/Apply/apps/v1/", "hpa/Update/apps/v1/"}, managers(t, obj))
			assert.JSONEq(t, replicasFields, owned(t, obj, "hpa", metav1.ManagedFieldsOperationUpdate, ""))
			assert.JSONEq(t, aliceFieldsNoReplicas, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a create by update is recorded as an Update",
		steps: []step{{manager: "kubectl-create", write: func(obj runtime.Object) {
			d := obj.(*appsv1.Deployment)
			d.Name, d.Namespace = "web", "ns"
			d.Spec.Replicas = ptr.To[int32](1)
		}}},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, []string{"kubectl-create/Update/apps/v1/"}, managers(t, obj))
			// Name and namespace are never recorded; nothing is defaulted here.
			assert.JSONEq(t, replicasFields, owned(t, obj, "kubectl-create", metav1.ManagedFieldsOperationUpdate, ""))
		},
	}, {
		name: "removing a field from the applied configuration removes it",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "alice", patch: deployHead + deploySpec},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Empty(t, deploymentOf(t, obj).Labels)
			assert.NotContains(t, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""), "f:team")
		},
	}, {
		name: "a removed field another manager also applied stays",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "bob", patch: deployHead + "  labels: {team: a}\n"},
			{manager: "alice", patch: deployHead + deploySpec},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, map[string]string{"team": "a"}, deploymentOf(t, obj).Labels)
			assert.JSONEq(t, `{"f:metadata":{"f:labels":{"f:team":{}}}}`, owned(t, obj, "bob", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "an update that sets an empty managedFields list clears them",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "editor", write: func(obj runtime.Object) {
				obj.(*appsv1.Deployment).ManagedFields = []metav1.ManagedFieldsEntry{}
			}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Empty(t, managers(t, obj))
		},
	}, {
		name: "an update that edits managedFields keeps the edit",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "editor", write: func(obj runtime.Object) {
				obj.(*appsv1.Deployment).ManagedFields[0].Manager = "renamed"
			}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, []string{"renamed/Apply/apps/v1/"}, managers(t, obj))
		},
	}, {
		name:  "a main-resource apply owns no status",
		steps: []step{{manager: "alice", patch: aliceApply + "status: {replicas: 4}\n"}},
		check: func(t *testing.T, obj runtime.Object) {
			assert.JSONEq(t, aliceFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a status update is recorded with subresource status and owns only status",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "deployment-controller", sub: "status", write: func(obj runtime.Object) {
				d := obj.(*appsv1.Deployment)
				d.Status.ReadyReplicas = 2
				d.Spec.Replicas = ptr.To[int32](9) // the caller resets it; nobody may own it through status
			}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.JSONEq(t, `{"f:status":{"f:readyReplicas":{}}}`,
				owned(t, obj, "deployment-controller", metav1.ManagedFieldsOperationUpdate, "status"))
			assert.JSONEq(t, aliceFields, owned(t, obj, "alice", metav1.ManagedFieldsOperationApply, ""))
		},
	}, {
		name: "a status apply is recorded with subresource status",
		steps: []step{
			{manager: "alice", patch: aliceApply},
			{manager: "ctrl", sub: "status", patch: deployHead + "status: {readyReplicas: 1}\n"},
			{manager: "other", sub: "status", patch: deployHead + "status: {readyReplicas: 3}\n", wantCode: 409,
				wantCauses: []metav1.StatusCause{conflict(".status.readyReplicas", `"ctrl" with subresource "status"`)}},
		},
		check: func(t *testing.T, obj runtime.Object) {
			assert.Equal(t, int32(1), deploymentOf(t, obj).Status.ReadyReplicas)
			assert.JSONEq(t, `{"f:status":{"f:readyReplicas":{}}}`, owned(t, obj, "ctrl", metav1.ManagedFieldsOperationApply, "status"))
		},
	}}
	m, err := ForBuiltin(deploymentGVK)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, play(t, m, newDeployment, tt.steps))
		})
	}
}

func TestBuiltinErrors(t *testing.T) {
	ctx := context.Background()
	deployments, err := ForBuiltin(deploymentGVK)
	require.NoError(t, err)
	configMaps, err := ForBuiltin(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	require.NoError(t, err)
	live, err := deployments.Apply(ctx, nil, []byte(aliceApply), "alice", "", false)
	require.NoError(t, err)

	tests := []struct {
		name     string
		do       func() (runtime.Object, error)
		wantCode int32
		wantMsg  string
		causes   []metav1.StatusCause
	}{{
		name:     "apply without a field manager",
		do:       func() (runtime.Object, error) { return deployments.Apply(ctx, live, []byte(aliceApply), "", "", false) },
		wantCode: 422,
		causes:   []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value: is required for apply patch", Field: "fieldManager"}},
	}, {
		name: "a patch that is not YAML",
		do: func() (runtime.Object, error) {
			return deployments.Apply(ctx, live, []byte("{spec: [}"), "alice", "", false)
		},
		wantCode: 400,
		wantMsg:  "error decoding patch",
	}, {
		name: "a patch in another version",
		do: func() (runtime.Object, error) {
			return deployments.Apply(ctx, live, []byte(strings.Replace(aliceApply, "apps/v1", "apps/v1beta2", 1)), "alice", "", false)
		},
		wantCode: 400,
		wantMsg:  "invalid object type: apps/v1beta2, Kind=Deployment",
	}, {
		name: "a patch of another kind",
		do: func() (runtime.Object, error) {
			return deployments.Apply(ctx, live, []byte(strings.Replace(aliceApply, "kind: Deployment", "kind: StatefulSet", 1)), "alice", "", false)
		},
		wantCode: 400,
		wantMsg:  "invalid object type: apps/v1, Kind=StatefulSet",
	}, {
		name: "a patch that sets managedFields",
		do: func() (runtime.Object, error) {
			return deployments.Apply(ctx, live, []byte(deployHead+"  managedFields: [{manager: x}]\n"), "alice", "", false)
		},
		wantCode: 400,
		wantMsg:  "metadata.managedFields must be nil",
	}, {
		name: "a patch with a field the schema does not have",
		do: func() (runtime.Object, error) {
			return deployments.Apply(ctx, live, []byte(deployHead+"spec: {bogus: 1}\n"), "alice", "", false)
		},
		wantCode: 500,
		wantMsg:  ".spec.bogus: field not declared in schema",
	}, {
		name: "an update with an unprintable field manager",
		do: func() (runtime.Object, error) {
			return deployments.Update(ctx, live, live.DeepCopyObject(), "bad\x00name", "")
		},
		wantCode: 422,
		wantMsg:  "UpdateOptions.meta.k8s.io",
	}, {
		name: "a subresource the manager does not serve",
		do: func() (runtime.Object, error) {
			return deployments.Update(ctx, live, live.DeepCopyObject(), "hpa", "scale")
		},
		wantCode: 404,
	}, {
		name: "status of a kind without a status subresource",
		do: func() (runtime.Object, error) {
			return configMaps.Update(ctx, nil, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, "x", "status")
		},
		wantCode: 404,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.do()
			assert.Nil(t, out)
			requireStatus(t, err, tt.wantCode, tt.causes)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

// The store hands in the objects it keeps; they must come back unchanged,
// and the result must look the way the caller's object does.
func TestInputsUntouchedAndRepresentationKept(t *testing.T) {
	ctx := context.Background()
	m, err := ForBuiltin(deploymentGVK)
	require.NoError(t, err)
	created, err := m.Apply(ctx, nil, []byte(aliceApply), "alice", "", false)
	require.NoError(t, err)
	assert.Empty(t, created.GetObjectKind().GroupVersionKind(), "a typed create carries no TypeMeta, as typed clients see it")

	withTypeMeta := created.DeepCopyObject()
	withTypeMeta.GetObjectKind().SetGroupVersionKind(deploymentGVK)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(created)
	require.NoError(t, err)
	asUnstructured := &unstructured.Unstructured{Object: u}
	asUnstructured.SetGroupVersionKind(deploymentGVK)

	for _, live := range []runtime.Object{created, withTypeMeta, asUnstructured} {
		before := live.DeepCopyObject()
		applied, err := m.Apply(ctx, live, []byte(replicasApply("4")), "bob", "", true)
		require.NoError(t, err)
		assert.IsType(t, live, applied)
		assert.Equal(t, live.GetObjectKind().GroupVersionKind(), applied.GetObjectKind().GroupVersionKind())

		newObj := live.DeepCopyObject()
		newBefore := newObj.DeepCopyObject()
		updated, err := m.Update(ctx, live, newObj, "carol", "")
		require.NoError(t, err)
		assert.IsType(t, live, updated)

		assert.Equal(t, before, live, "live changed")
		assert.Equal(t, newBefore, newObj, "newObj changed")
	}
}

func TestTimestamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m, err := ForBuiltin(deploymentGVK)
		require.NoError(t, err)
		timeOf := func(obj runtime.Object, manager string) time.Time {
			for _, e := range deploymentOf(t, obj).ManagedFields {
				if e.Manager == manager {
					return e.Time.Time
				}
			}
			t.Fatalf("no entry for %s", manager)
			return time.Time{}
		}

		time.Sleep(1500 * time.Millisecond) // the bubble's clock, so that truncation shows
		first, err := m.Apply(ctx, nil, []byte(aliceApply), "alice", "", false)
		require.NoError(t, err)
		assert.Equal(t, time.Now().Truncate(time.Second).UTC(), timeOf(first, "alice"))

		time.Sleep(time.Minute)
		again, err := m.Apply(ctx, first, []byte(aliceApply), "alice", "", false)
		require.NoError(t, err)
		assert.True(t, apiequality.Semantic.DeepEqual(first, again), "an unchanged re-apply must leave the object as it was")

		same, err := m.Update(ctx, first, first.DeepCopyObject(), "alice", "")
		require.NoError(t, err)
		assert.True(t, apiequality.Semantic.DeepEqual(first, same), "an update that changes nothing keeps the timestamps")

		changed, err := m.Apply(ctx, first, []byte(strings.Replace(aliceApply, "replicas: 2", "replicas: 3", 1)), "alice", "", false)
		require.NoError(t, err)
		assert.Equal(t, time.Now().Truncate(time.Second).UTC(), timeOf(changed, "alice"))
		assert.NotEqual(t, timeOf(first, "alice"), timeOf(changed, "alice"))
	})
}

// A main-resource apply that only changes status is a no-op once the store
// puts the live status back; KeepTimestamps then keeps the old time.
func TestKeepTimestamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m, err := ForBuiltin(deploymentGVK)
		require.NoError(t, err)
		live, err := m.Apply(ctx, nil, []byte(aliceApply), "alice", "", false)
		require.NoError(t, err)
		time.Sleep(time.Minute)

		out, err := m.Apply(ctx, live, []byte(aliceApply+"status: {replicas: 4}\n"), "alice", "", false)
		require.NoError(t, err)
		deploymentOf(t, out).Status = deploymentOf(t, live).Status // the store's status reset
		require.False(t, apiequality.Semantic.DeepEqual(live, out), "the time moved")

		kept, err := KeepTimestamps(ctx, out, live)
		require.NoError(t, err)
		assert.True(t, apiequality.Semantic.DeepEqual(live, kept))

		changed, err := m.Apply(ctx, live, []byte(strings.Replace(aliceApply, "replicas: 2", "replicas: 3", 1)), "alice", "", false)
		require.NoError(t, err)
		kept, err = KeepTimestamps(ctx, changed.DeepCopyObject(), live)
		require.NoError(t, err)
		assert.Equal(t, changed, kept, "a real change keeps its new time")
	})
}

func TestForBuiltin(t *testing.T) {
	t.Logf("first ForBuiltin in this process took %v (parses the built-in schema)", firstForBuiltin)

	start := time.Now()
	m, err := ForBuiltin(deploymentGVK)
	require.NoError(t, err)
	t.Logf("a later ForBuiltin took %v", time.Since(start))
	assert.Same(t, builtinTypes(), builtinTypes(), "the schema is parsed once and shared")
	assert.Equal(t, deploymentGVK, m.GroupVersionKind())

	for _, tt := range []struct {
		gvk       schema.GroupVersionKind
		hasStatus bool
		wantErr   bool
	}{
		{gvk: deploymentGVK, hasStatus: true},
		{gvk: corev1.SchemeGroupVersion.WithKind("Pod"), hasStatus: true},
		{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		{gvk: schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}},
		{gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, wantErr: true},
		{gvk: appsv1.SchemeGroupVersion.WithKind("Nothing"), wantErr: true},
	} {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			m, err := ForBuiltin(tt.gvk)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			_, hasStatus := m.bySubresource["status"]
			assert.Equal(t, tt.hasStatus, hasStatus)
		})
	}
}

func TestDefaultFieldManager(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tt := range []struct{ manager, userAgent, want string }{
		{"mine", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "mine"},
		{"", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "converge", "converge"},
		{"", "bad\tagent/1", "badagent"},
		{"", long, long[:128]},
		{"", "", ""},
	} {
		assert.Equal(t, tt.want, DefaultFieldManager(tt.manager, tt.userAgent), "%q %q", tt.manager, tt.userAgent)
	}
}
