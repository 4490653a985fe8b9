package webapp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// TestSchema checks config/crd against the Go types, on the fake backend
// and on a real kube-apiserver: the API server fills the defaults, keeps
// every field the types write (a field the schema lacks would be pruned),
// and refuses what is out of bounds with the field's path.
func TestSchema(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := fake.New(fake.Config{Namespace: "demo", CRDPaths: []string{"config/crd"}})
			require.NoError(t, err)
			checkSchema(t, b)
		})
	})
	t.Run("envtest", func(t *testing.T) {
		b, err := envtest.NewBackendWith(simtest.Require(t), envtest.BackendConfig{Prefix: "webapp-schema-", CRDPaths: []string{"config/crd"}})
		require.NoError(t, err)
		checkSchema(t, b)
	})
}

func checkSchema(t *testing.T, b sim.Backend) {
	ctx := context.Background()
	env, err := b.Start(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Stop()) }()
	scheme, err := webapp.NewScheme()
	require.NoError(t, err)
	c, err := client.New(env.RESTConfig, client.Options{Scheme: scheme})
	require.NoError(t, err)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: env.Namespace} }

	// Defaults.
	{
		app := &v1alpha1.WebApp{ObjectMeta: meta("defaults"), Spec: v1alpha1.WebAppSpec{Image: "nginx"}}
		require.NoError(t, c.Create(ctx, app))
		assert.Equal(t, ptr.To[int32](1), app.Spec.Replicas)
		assert.Equal(t, int32(8080), app.Spec.Port)

		zero := &v1alpha1.WebApp{ObjectMeta: meta("zero"), Spec: v1alpha1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](0)}}
		require.NoError(t, c.Create(ctx, zero))
		assert.Equal(t, ptr.To[int32](0), zero.Spec.Replicas, "an explicit 0 is kept")
	}

	// Every field is kept.
	{
		app := &v1alpha1.WebApp{ObjectMeta: meta("full"), Spec: v1alpha1.WebAppSpec{
			Replicas: ptr.To[int32](50), Image: "nginx:1.27", Port: 65535, Config: map[string]string{"a.b-c_D9": "x", "e": ""},
		}}
		require.NoError(t, c.Create(ctx, app))
		want := app.Spec.DeepCopy()
		app.Status = v1alpha1.WebAppStatus{ObservedGeneration: 1, ReadyReplicas: 50, ConfigHash: "0123456789abcdef", Conditions: []metav1.Condition{{
			Type: v1alpha1.Available, Status: metav1.ConditionTrue, ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), Reason: "ReplicasReady", Message: "50 of 50",
		}}}
		wantStatus := app.Status.DeepCopy()
		require.NoError(t, c.Status().Update(ctx, app))

		got := &v1alpha1.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), got))
		assert.Equal(t, *want, got.Spec)
		assert.True(t, wantStatus.Conditions[0].LastTransitionTime.Equal(&got.Status.Conditions[0].LastTransitionTime))
		got.Status.Conditions[0].LastTransitionTime = wantStatus.Conditions[0].LastTransitionTime // the time zone may differ
		assert.Equal(t, *wantStatus, got.Status)
	}

	manyKeys := map[string]string{}
	for i := range 65 {
		manyKeys[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.WebAppSpec
		reason string // in the refusal
	}{
		{"no image", v1alpha1.WebAppSpec{}, "spec.image"},
		{"too many replicas", v1alpha1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](51)}, "spec.replicas"},
		{"negative replicas", v1alpha1.WebAppSpec{Image: "nginx", Replicas: ptr.To[int32](-1)}, "spec.replicas"},
		{"port too high", v1alpha1.WebAppSpec{Image: "nginx", Port: 65536}, "spec.port"},
		{"negative port", v1alpha1.WebAppSpec{Image: "nginx", Port: -1}, "spec.port"},
		{"a config key with a space", v1alpha1.WebAppSpec{Image: "nginx", Config: map[string]string{"a b": "x"}}, "config keys must be valid ConfigMap keys"},
		{"a config key too long", v1alpha1.WebAppSpec{Image: "nginx", Config: map[string]string{strings.Repeat("k", 254): "x"}}, "config keys must be valid ConfigMap keys"},
		{"too many config keys", v1alpha1.WebAppSpec{Image: "nginx", Config: manyKeys}, "spec.config"},
	} {
		err := c.Create(ctx, &v1alpha1.WebApp{ObjectMeta: meta("refused"), Spec: tc.spec})
		if assert.True(t, apierrors.IsInvalid(err), "%s: want 422 Invalid, got %v", tc.name, err) {
			assert.Contains(t, err.Error(), tc.reason, tc.name)
		}
	}
}
