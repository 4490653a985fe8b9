package semantic_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/sim/internal/semantic"
)

func TestEqualIsSemantic(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	status := func(tm time.Time, phase corev1.PodPhase) *corev1.PodStatus {
		return &corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(tm)}}}
	}
	assert.True(t, semantic.Equal(status(at, corev1.PodRunning), status(at, corev1.PodRunning)), "identical")
	// The same instant in another location is not identical, but equal.
	assert.True(t, semantic.Equal(status(at, corev1.PodRunning), status(at.In(time.FixedZone("x", 3600)), corev1.PodRunning)))
	assert.False(t, semantic.Equal(status(at, corev1.PodRunning), status(at, corev1.PodPending)))
	assert.False(t, semantic.Equal(status(at, corev1.PodRunning), status(at.Add(time.Second), corev1.PodRunning)))

	// 1000m and 1 are one quantity; nil and empty are one list.
	a := &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
	b := &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	assert.True(t, semantic.Equal(a, b))
	assert.True(t, semantic.Equal(&corev1.PodSpec{}, &corev1.PodSpec{Containers: []corev1.Container{}}))
	assert.False(t, semantic.Equal(&corev1.PodSpec{NodeName: "a"}, &corev1.PodSpec{NodeName: "b"}))
}
