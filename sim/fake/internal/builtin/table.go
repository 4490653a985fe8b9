package builtin

import "k8s.io/apimachinery/pkg/runtime/schema"

// Verb sets most resources share. Entries share them: clone before handing
// one out.
var (
	readWrite      = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	getPatchUpdate = []string{"get", "patch", "update"}
	createOnly     = []string{"create"}
)

// served is kube-apiserver v1.37.2's discovery: group-version by
// group-version in the order it lists them, each group's preferred version
// first, and within one, resources and their subresources in its order.
var served = []Resource{
	// v1
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "bindings"},
		Kind: "Binding", Singular: "binding", Namespaced: true,
		Verbs: createOnly,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "componentstatuses"},
		Kind: "ComponentStatus", Singular: "componentstatus", Namespaced: false,
		Verbs: []string{"get", "list"}, ShortNames: []string{"cs"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "configmaps"},
		Kind: "ConfigMap", Singular: "configmap", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"cm"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "endpoints"},
		Kind: "Endpoints", Singular: "endpoints", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"ep"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "events"},
		Kind: "Event", Singular: "event", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"ev"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "limitranges"},
		Kind: "LimitRange", Singular: "limitrange", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"limits"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "namespaces"},
		Kind: "Namespace", Singular: "namespace", Namespaced: false,
		Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}, ShortNames: []string{"ns"},
		Subresources: []Subresource{
			{Name: "finalize", Kind: "Namespace", Verbs: []string{"update"}},
			{Name: "status", Kind: "Namespace", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "nodes"},
		Kind: "Node", Singular: "node", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"no"},
		Subresources: []Subresource{
			{Name: "proxy", Kind: "NodeProxyOptions", Verbs: []string{"create", "delete", "get", "patch", "update"}},
			{Name: "status", Kind: "Node", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "persistentvolumeclaims"},
		Kind: "PersistentVolumeClaim", Singular: "persistentvolumeclaim", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"pvc"},
		Subresources: []Subresource{
			{Name: "status", Kind: "PersistentVolumeClaim", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "persistentvolumes"},
		Kind: "PersistentVolume", Singular: "persistentvolume", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"pv"},
		Subresources: []Subresource{
			{Name: "status", Kind: "PersistentVolume", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"},
		Kind: "Pod", Singular: "pod", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"po"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "attach", Kind: "PodAttachOptions", Verbs: []string{"create", "get"}},
			{Name: "binding", Kind: "Binding", Verbs: createOnly},
			{Name: "ephemeralcontainers", Kind: "Pod", Verbs: getPatchUpdate},
			{Name: "eviction", Kind: "Eviction", Group: "policy", Version: "v1", Verbs: createOnly},
			{Name: "exec", Kind: "PodExecOptions", Verbs: []string{"create", "get"}},
			{Name: "log", Kind: "Pod", Verbs: []string{"get"}},
			{Name: "portforward", Kind: "PodPortForwardOptions", Verbs: []string{"create", "get"}},
			{Name: "proxy", Kind: "PodProxyOptions", Verbs: []string{"create", "delete", "get", "patch", "update"}},
			{Name: "resize", Kind: "Pod", Verbs: getPatchUpdate},
			{Name: "status", Kind: "Pod", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "podtemplates"},
		Kind: "PodTemplate", Singular: "podtemplate", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "replicationcontrollers"},
		Kind: "ReplicationController", Singular: "replicationcontroller", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"rc"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: getPatchUpdate},
			{Name: "status", Kind: "ReplicationController", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "resourcequotas"},
		Kind: "ResourceQuota", Singular: "resourcequota", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"quota"},
		Subresources: []Subresource{
			{Name: "status", Kind: "ResourceQuota", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "secrets"},
		Kind: "Secret", Singular: "secret", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "serviceaccounts"},
		Kind: "ServiceAccount", Singular: "serviceaccount", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"sa"},
		Subresources: []Subresource{
			{Name: "token", Kind: "TokenRequest", Group: "authentication.k8s.io", Version: "v1", Verbs: createOnly},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "", Version: "v1", Resource: "services"},
		Kind: "Service", Singular: "service", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"svc"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "proxy", Kind: "ServiceProxyOptions", Verbs: []string{"create", "delete", "get", "patch", "update"}},
			{Name: "status", Kind: "Service", Verbs: getPatchUpdate},
		},
	},
	// apps/v1
	{
		GVR:  schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"},
		Kind: "ControllerRevision", Singular: "controllerrevision", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
		Kind: "DaemonSet", Singular: "daemonset", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"ds"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "status", Kind: "DaemonSet", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Kind: "Deployment", Singular: "deployment", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"deploy"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: getPatchUpdate},
			{Name: "status", Kind: "Deployment", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"},
		Kind: "ReplicaSet", Singular: "replicaset", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"rs"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: getPatchUpdate},
			{Name: "status", Kind: "ReplicaSet", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"},
		Kind: "StatefulSet", Singular: "statefulset", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"sts"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Verbs: getPatchUpdate},
			{Name: "status", Kind: "StatefulSet", Verbs: getPatchUpdate},
		},
	},
	// events.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"},
		Kind: "Event", Singular: "event", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"ev"},
	},
	// authentication.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"},
		Kind: "SelfSubjectReview", Singular: "selfsubjectreview", Namespaced: false,
		Verbs: createOnly,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"},
		Kind: "TokenReview", Singular: "tokenreview", Namespaced: false,
		Verbs: createOnly,
	},
	// authorization.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews"},
		Kind: "LocalSubjectAccessReview", Singular: "localsubjectaccessreview", Namespaced: true,
		Verbs: createOnly,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"},
		Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview", Namespaced: false,
		Verbs: createOnly,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"},
		Kind: "SelfSubjectRulesReview", Singular: "selfsubjectrulesreview", Namespaced: false,
		Verbs: createOnly,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"},
		Kind: "SubjectAccessReview", Singular: "subjectaccessreview", Namespaced: false,
		Verbs: createOnly,
	},
	// autoscaling/v2
	{
		GVR:  schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		Kind: "HorizontalPodAutoscaler", Singular: "horizontalpodautoscaler", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"hpa"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "status", Kind: "HorizontalPodAutoscaler", Verbs: getPatchUpdate},
		},
	},
	// autoscaling/v1
	{
		GVR:  schema.GroupVersionResource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"},
		Kind: "HorizontalPodAutoscaler", Singular: "horizontalpodautoscaler", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"hpa"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "status", Kind: "HorizontalPodAutoscaler", Verbs: getPatchUpdate},
		},
	},
	// batch/v1
	{
		GVR:  schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"},
		Kind: "CronJob", Singular: "cronjob", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"cj"}, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "status", Kind: "CronJob", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
		Kind: "Job", Singular: "job", Namespaced: true,
		Verbs: readWrite, Categories: []string{"all"},
		Subresources: []Subresource{
			{Name: "status", Kind: "Job", Verbs: getPatchUpdate},
		},
	},
	// certificates.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"},
		Kind: "CertificateSigningRequest", Singular: "certificatesigningrequest", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"csr"},
		Subresources: []Subresource{
			{Name: "approval", Kind: "CertificateSigningRequest", Verbs: getPatchUpdate},
			{Name: "status", Kind: "CertificateSigningRequest", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"},
		Kind: "ClusterTrustBundle", Singular: "clustertrustbundle", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"},
		Kind: "PodCertificateRequest", Singular: "podcertificaterequest", Namespaced: true,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "PodCertificateRequest", Verbs: getPatchUpdate},
		},
	},
	// networking.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
		Kind: "IngressClass", Singular: "ingressclass", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
		Kind: "Ingress", Singular: "ingress", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"ing"},
		Subresources: []Subresource{
			{Name: "status", Kind: "Ingress", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ipaddresses"},
		Kind: "IPAddress", Singular: "ipaddress", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"ip"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		Kind: "NetworkPolicy", Singular: "networkpolicy", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"netpol"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"},
		Kind: "ServiceCIDR", Singular: "servicecidr", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "ServiceCIDR", Verbs: getPatchUpdate},
		},
	},
	// policy/v1
	{
		GVR:  schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
		Kind: "PodDisruptionBudget", Singular: "poddisruptionbudget", Namespaced: true,
		Verbs: readWrite, ShortNames: []string{"pdb"},
		Subresources: []Subresource{
			{Name: "status", Kind: "PodDisruptionBudget", Verbs: getPatchUpdate},
		},
	},
	// rbac.authorization.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		Kind: "ClusterRoleBinding", Singular: "clusterrolebinding", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		Kind: "ClusterRole", Singular: "clusterrole", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		Kind: "Role", Singular: "role", Namespaced: true,
		Verbs: readWrite,
	},
	// storage.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"},
		Kind: "CSIDriver", Singular: "csidriver", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes"},
		Kind: "CSINode", Singular: "csinode", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "CSINode", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csistoragecapacities"},
		Kind: "CSIStorageCapacity", Singular: "csistoragecapacity", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"},
		Kind: "StorageClass", Singular: "storageclass", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"sc"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"},
		Kind: "VolumeAttachment", Singular: "volumeattachment", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "VolumeAttachment", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattributesclasses"},
		Kind: "VolumeAttributesClass", Singular: "volumeattributesclass", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"vac"},
	},
	// admissionregistration.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
		Kind: "MutatingAdmissionPolicy", Singular: "mutatingadmissionpolicy", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
		Kind: "MutatingAdmissionPolicyBinding", Singular: "mutatingadmissionpolicybinding", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
		Kind: "MutatingWebhookConfiguration", Singular: "mutatingwebhookconfiguration", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		Kind: "ValidatingAdmissionPolicy", Singular: "validatingadmissionpolicy", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
		Subresources: []Subresource{
			{Name: "status", Kind: "ValidatingAdmissionPolicy", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
		Kind: "ValidatingAdmissionPolicyBinding", Singular: "validatingadmissionpolicybinding", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		Kind: "ValidatingWebhookConfiguration", Singular: "validatingwebhookconfiguration", Namespaced: false,
		Verbs: readWrite, Categories: []string{"api-extensions"},
	},
	// scheduling.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"},
		Kind: "PriorityClass", Singular: "priorityclass", Namespaced: false,
		Verbs: readWrite, ShortNames: []string{"pc"},
	},
	// coordination.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		Kind: "Lease", Singular: "lease", Namespaced: true,
		Verbs: readWrite,
	},
	// node.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"},
		Kind: "RuntimeClass", Singular: "runtimeclass", Namespaced: false,
		Verbs: readWrite,
	},
	// discovery.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
		Kind: "EndpointSlice", Singular: "endpointslice", Namespaced: true,
		Verbs: readWrite,
	},
	// resource.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
		Kind: "DeviceClass", Singular: "deviceclass", Namespaced: false,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"},
		Kind: "DeviceTaintRule", Singular: "devicetaintrule", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "DeviceTaintRule", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"},
		Kind: "ResourceClaim", Singular: "resourceclaim", Namespaced: true,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "ResourceClaim", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
		Kind: "ResourceClaimTemplate", Singular: "resourceclaimtemplate", Namespaced: true,
		Verbs: readWrite,
	},
	{
		GVR:  schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"},
		Kind: "ResourceSlice", Singular: "resourceslice", Namespaced: false,
		Verbs: readWrite,
	},
	// flowcontrol.apiserver.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas"},
		Kind: "FlowSchema", Singular: "flowschema", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "FlowSchema", Verbs: getPatchUpdate},
		},
	},
	{
		GVR:  schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"},
		Kind: "PriorityLevelConfiguration", Singular: "prioritylevelconfiguration", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "PriorityLevelConfiguration", Verbs: getPatchUpdate},
		},
	},
	// storagemigration.k8s.io/v1
	{
		GVR:  schema.GroupVersionResource{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"},
		Kind: "StorageVersionMigration", Singular: "storageversionmigration", Namespaced: false,
		Verbs: readWrite,
		Subresources: []Subresource{
			{Name: "status", Kind: "StorageVersionMigration", Verbs: getPatchUpdate},
		},
	},
}
