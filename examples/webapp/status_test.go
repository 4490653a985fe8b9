package webapp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// deployment is a Deployment whose pods all run its current template.
func deployment(generation, observed int64, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: generation},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: max(ready, 2), UpdatedReplicas: max(ready, 2), ReadyReplicas: ready},
	}
}

// rolling is a Deployment midway through a rollout: updated of its total
// pods run the current template.
func rolling(total, updated, ready int32) *appsv1.Deployment {
	d := deployment(2, 2, ready)
	d.Status.Replicas, d.Status.UpdatedReplicas = total, updated
	return d
}

func TestDesiredStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dep         *appsv1.Deployment
		ready       int32
		available   metav1.ConditionStatus
		progressing metav1.ConditionStatus
		reason      string
	}{
		{"no Deployment yet", nil, 0, metav1.ConditionFalse, metav1.ConditionTrue, ReasonNoDeployment},
		{"a spec the Deployment has not observed", deployment(2, 1, 2), 2, metav1.ConditionFalse, metav1.ConditionTrue, ReasonRollingOut},
		{"too few pods ready", deployment(2, 2, 1), 1, metav1.ConditionFalse, metav1.ConditionTrue, ReasonReplicasNotReady},
		{"enough pods ready", deployment(2, 2, 2), 2, metav1.ConditionTrue, metav1.ConditionFalse, ReasonReplicasReady},
		{"more than enough (scaling down)", rolling(3, 3, 3), 3, metav1.ConditionTrue, metav1.ConditionTrue, ReasonReplicasReady},
		{"enough ready, some of the old template", rolling(3, 1, 2), 2, metav1.ConditionTrue, metav1.ConditionTrue, ReasonReplicasReady},
		{"too few of the new template", rolling(2, 1, 2), 2, metav1.ConditionTrue, metav1.ConditionTrue, ReasonReplicasReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := webApp() // generation 3, 2 replicas
			s := desiredStatus(app, tc.dep, "h")
			assert.Equal(t, int64(3), s.ObservedGeneration)
			assert.Equal(t, "h", s.ConfigHash)
			assert.Equal(t, tc.ready, s.ReadyReplicas)
			a := meta.FindStatusCondition(s.Conditions, v1alpha1.Available)
			p := meta.FindStatusCondition(s.Conditions, v1alpha1.Progressing)
			if assert.NotNil(t, a) && assert.NotNil(t, p) {
				assert.Equal(t, tc.available, a.Status)
				assert.Equal(t, tc.reason, a.Reason)
				assert.Equal(t, int64(3), a.ObservedGeneration)
				assert.NotEmpty(t, a.Message)
				assert.Equal(t, tc.progressing, p.Status)
				assert.False(t, a.LastTransitionTime.IsZero())
			}

			// Computed again on the status it produced: the same, so not
			// written again.
			app.Status = s
			assert.True(t, apiequality.Semantic.DeepEqual(s, desiredStatus(app, tc.dep, "h")))
		})
	}
}

// TestDesiredStatusKeepsTransitionTimes: a condition whose status does
// not change keeps the time it last changed.
func TestDesiredStatusKeepsTransitionTimes(t *testing.T) {
	app := webApp()
	app.Status = desiredStatus(app, deployment(2, 2, 1), "h")
	before := meta.FindStatusCondition(app.Status.Conditions, v1alpha1.Available).LastTransitionTime
	app.Status.Conditions[0].LastTransitionTime = metav1.NewTime(before.Add(-time.Hour))
	want := app.Status.Conditions[0].LastTransitionTime

	s := desiredStatus(app, deployment(2, 2, 0), "h") // still not Available, another message
	a := meta.FindStatusCondition(s.Conditions, v1alpha1.Available)
	assert.Equal(t, metav1.ConditionFalse, a.Status)
	assert.Equal(t, "0 of 2 replicas ready", a.Message)
	assert.Equal(t, want, a.LastTransitionTime)
}
