package v1alpha1_test

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// TestRoundTrip fills WebApps and WebAppLists with random values, then
// checks that a deep copy is equal to the original, that JSON encodes and
// decodes it without loss, and that changing every field of the copy
// leaves the original alone (nothing shared).
func TestRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), serializer.NewCodecFactory(scheme))
	for range 100 {
		for _, original := range []runtime.Object{&v1alpha1.WebApp{}, &v1alpha1.WebAppList{}} {
			f.Fill(original)
			data, err := json.Marshal(original)
			require.NoError(t, err)

			c := original.DeepCopyObject()
			require.True(t, apiequality.Semantic.DeepEqual(original, c), "the copy differs from the original: %s", data)

			decoded := newLike(original)
			require.NoError(t, json.Unmarshal(data, decoded))
			require.True(t, apiequality.Semantic.DeepEqual(original, decoded), "JSON lost something: %s", data)

			// Change every value of the copy, keeping its shape: the
			// original must not see it.
			fuzzer.ValueFuzz(c)
			require.True(t, apiequality.Semantic.DeepEqual(original, decoded), "changing the copy changed the original: %s", data)
		}
	}
}

func newLike(obj runtime.Object) runtime.Object {
	switch obj.(type) {
	case *v1alpha1.WebApp:
		return &v1alpha1.WebApp{}
	default:
		return &v1alpha1.WebAppList{}
	}
}

// TestDeepCopySharesNothing changes every reference field of a copy by
// hand: the fuzzed round trip above covers the same ground at random.
func TestDeepCopySharesNothing(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	original := &v1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Labels: map[string]string{"a": "1"}, Finalizers: []string{"f"}},
		Spec:       v1alpha1.WebAppSpec{Replicas: ptr.To[int32](3), Image: "nginx", Port: 80, Config: map[string]string{"k": "v"}},
		Status: v1alpha1.WebAppStatus{ObservedGeneration: 2, ReadyReplicas: 3, ConfigHash: "h",
			Conditions: []metav1.Condition{{Type: v1alpha1.Available, Status: metav1.ConditionTrue, LastTransitionTime: now, Reason: "R", Message: "m"}}},
	}
	want := original.DeepCopy()
	require.Equal(t, original, want)

	c := original.DeepCopyObject().(*v1alpha1.WebApp)
	*c.Spec.Replicas = 7
	c.Spec.Config["k"] = "changed"
	c.Labels["a"] = "changed"
	c.Finalizers[0] = "changed"
	c.Status.Conditions[0].Status = metav1.ConditionFalse
	assert.Equal(t, want, original, "changing the copy changed the original")

	list := &v1alpha1.WebAppList{Items: []v1alpha1.WebApp{*original}}
	lc := list.DeepCopyObject().(*v1alpha1.WebAppList)
	lc.Items[0].Spec.Config["k"] = "changed"
	assert.Equal(t, "v", list.Items[0].Spec.Config["k"])

	var nilApp *v1alpha1.WebApp
	assert.Nil(t, nilApp.DeepCopy())
	assert.Nil(t, (*v1alpha1.WebAppList)(nil).DeepCopy())
}
