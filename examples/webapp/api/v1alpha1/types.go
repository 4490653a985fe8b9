package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WebApp is a stateless web server: a Deployment of Replicas pods running
// Image on Port, a Service in front of them and a ConfigMap of Config.
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebAppSpec   `json:"spec"`
	Status WebAppStatus `json:"status,omitempty"`
}

// WebAppSpec is what the user asks for.
type WebAppSpec struct {
	// Replicas is the number of pods, 0 to 50. The API server defaults it
	// to 1; it is a pointer so that an explicit 0 is sent, not defaulted.
	Replicas *int32 `json:"replicas,omitempty"`
	// Image is the container image. Required.
	Image string `json:"image"`
	// Port is the port the container listens on and the Service exposes,
	// 1 to 65535. The API server defaults it to 8080.
	Port int32 `json:"port,omitempty"`
	// Config is the data of the WebApp's ConfigMap, given to the pods as
	// environment variables. Changing it rolls the pods.
	Config map[string]string `json:"config,omitempty"`
}

// Condition types of a WebApp.
const (
	// Available: the Deployment has observed the current spec and at least
	// spec.replicas of its pods are ready (during a rollout, some may still
	// run the previous template).
	Available = "Available"
	// Progressing: the Deployment is not yet running exactly spec.replicas
	// pods, all of the current spec and ready.
	Progressing = "Progressing"
)

// WebAppStatus is what the operator last observed.
type WebAppStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReadyReplicas is the Deployment's ready pod count.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ConfigHash is the hash of the config the pods were given.
	ConfigHash string `json:"configHash,omitempty"`
	// Conditions are Available and Progressing.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WebAppList is a list of WebApps.
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}
