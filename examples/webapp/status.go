package webapp

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// Reasons of the conditions.
const (
	ReasonNoDeployment     = "NoDeployment"
	ReasonRollingOut       = "RollingOut"
	ReasonReplicasNotReady = "ReplicasNotReady"
	ReasonReplicasReady    = "ReplicasReady"
	ReasonRolloutComplete  = "RolloutComplete"
)

// desiredStatus is the status of app whose Deployment is dep (nil if there
// is none) running the config of hash. Available, as a Deployment's own, is
// about serving: the Deployment has observed its spec and enough pods are
// ready, maybe some of an older template while it rolls. Progressing is
// False only once the rollout is complete: exactly spec.replicas pods, all
// of the current template, all ready. Conditions that do not change keep their
// lastTransitionTime, so a status computed twice from the same objects is
// equal and not written again.
func desiredStatus(app *v1alpha1.WebApp, dep *appsv1.Deployment, hash string) v1alpha1.WebAppStatus {
	s := *app.Status.DeepCopy()
	s.ObservedGeneration = app.Generation
	s.ConfigHash = hash
	s.ReadyReplicas = 0
	if dep != nil {
		s.ReadyReplicas = dep.Status.ReadyReplicas
	}
	want := replicas(app)

	available := metav1.Condition{Type: v1alpha1.Available, Status: metav1.ConditionFalse, ObservedGeneration: app.Generation}
	progressing := metav1.Condition{Type: v1alpha1.Progressing, Status: metav1.ConditionTrue, ObservedGeneration: app.Generation}
	switch {
	case dep == nil:
		available.Reason, available.Message = ReasonNoDeployment, "the Deployment does not exist yet"
		progressing.Reason, progressing.Message = ReasonNoDeployment, available.Message
	case dep.Status.ObservedGeneration < dep.Generation:
		available.Reason = ReasonRollingOut
		available.Message = fmt.Sprintf("the Deployment has not observed generation %d yet", dep.Generation)
		progressing.Reason, progressing.Message = ReasonRollingOut, available.Message
	case dep.Status.ReadyReplicas < want:
		available.Reason = ReasonReplicasNotReady
		available.Message = fmt.Sprintf("%d of %d replicas ready", dep.Status.ReadyReplicas, want)
		progressing.Reason, progressing.Message = ReasonReplicasNotReady, available.Message
	default:
		available.Status, available.Reason = metav1.ConditionTrue, ReasonReplicasReady
		available.Message = fmt.Sprintf("%d of %d replicas ready", dep.Status.ReadyReplicas, want)
		if dep.Status.Replicas != want || dep.Status.UpdatedReplicas != want {
			progressing.Reason = ReasonRollingOut
			progressing.Message = fmt.Sprintf("%d pods for %d replicas, %d of them of the current template",
				dep.Status.Replicas, want, dep.Status.UpdatedReplicas)
		} else {
			progressing.Status, progressing.Reason = metav1.ConditionFalse, ReasonRolloutComplete
			progressing.Message = "every pod runs the current template"
		}
	}
	meta.SetStatusCondition(&s.Conditions, available)
	meta.SetStatusCondition(&s.Conditions, progressing)
	return s
}
