package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Mirror copies the data of a source ConfigMap into target ConfigMaps of
// its namespace, which it owns: they are deleted with it.
type Mirror struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MirrorSpec   `json:"spec"`
	Status MirrorStatus `json:"status,omitempty"`
}

// MirrorSpec is what to copy where.
type MirrorSpec struct {
	// Source is the name of the ConfigMap to copy, in the Mirror's namespace.
	Source string `json:"source"`
	// Targets are the names of the ConfigMaps to keep equal to the source:
	// at most MaxTargets, each once, none the source itself.
	Targets []string `json:"targets,omitempty"`
}

// MaxTargets is the most targets a Mirror may list.
const MaxTargets = 20

// MirrorStatus is what the controller last achieved.
type MirrorStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// SyncedTargets counts the targets that hold the source's data.
	SyncedTargets int32 `json:"syncedTargets,omitempty"`
	// SourceResourceVersion is the source's resourceVersion the targets
	// were synced from.
	SourceResourceVersion string `json:"sourceResourceVersion,omitempty"`
	// Conditions hold ConditionSynced.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionSynced is True when every target holds the source's data.
const ConditionSynced = "Synced"

// Reasons of ConditionSynced.
const (
	ReasonSynced            = "Synced"
	ReasonSourceNotFound    = "SourceNotFound"
	ReasonTargetNotOwned    = "TargetNotOwned"
	ReasonTargetWriteFailed = "TargetWriteFailed"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MirrorList is a list of Mirrors.
type MirrorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Mirror `json:"items"`
}
