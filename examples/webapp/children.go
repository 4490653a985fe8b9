package webapp

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// Labels and annotations the operator sets.
const (
	// LabelInstance is the WebApp's name, on every child and pod; the
	// Deployment and the Service select pods by it.
	LabelInstance = "app.kubernetes.io/instance"
	// ConfigHashAnnotation on the pod template is the hash of spec.config:
	// a config change changes the template, which rolls the pods.
	ConfigHashAnnotation = "examples.converge.dev/config-hash"

	labelName      = "app.kubernetes.io/name"
	labelManagedBy = "app.kubernetes.io/managed-by"
	containerName  = "web"
	portName       = "http"
	// The schema's defaults, for a WebApp a server did not default.
	defaultReplicas = 1
	defaultPort     = 8080
)

// ConfigMapName is the name of a WebApp's ConfigMap; its Deployment and
// Service are named as the WebApp.
func ConfigMapName(app *v1alpha1.WebApp) string { return app.Name + "-config" }

// ConfigHash is a short hash of config, the same for equal maps.
func ConfigHash(config map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(config)) {
		// Length-prefixed, so that no two maps write the same bytes.
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(config[k]), config[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// child is one of a WebApp's children, named but not yet read.
type child struct {
	kind string
	obj  client.Object
}

// childrenOf are app's children, in the order they are created: the
// ConfigMap before the pods that read it.
func childrenOf(app *v1alpha1.WebApp) []child {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: app.Namespace} }
	return []child{
		{"ConfigMap", &corev1.ConfigMap{ObjectMeta: meta(ConfigMapName(app))}},
		{"Deployment", &appsv1.Deployment{ObjectMeta: meta(app.Name)}},
		{"Service", &corev1.Service{ObjectMeta: meta(app.Name)}},
	}
}

// setChild makes obj what app asks for. It sets only the fields the
// operator owns and leaves the rest (the API server's defaults, other
// controllers' fields) alone, so that a second call on an object the
// server returned changes nothing and no write follows.
func setChild(obj client.Object, app *v1alpha1.WebApp, hash string) {
	obj.SetLabels(with(obj.GetLabels(), map[string]string{labelManagedBy: "webapp-operator"}, selector(app)))
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data = maps.Clone(app.Spec.Config)
	case *appsv1.Deployment:
		setDeployment(o, app, hash)
	case *corev1.Service:
		setService(o, app)
	}
}

func setDeployment(d *appsv1.Deployment, app *v1alpha1.WebApp, hash string) {
	if d.CreationTimestamp.IsZero() {
		// The selector cannot change once the Deployment exists.
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector(app)}
	}
	d.Spec.Replicas = ptr.To(replicas(app))
	t := &d.Spec.Template
	t.Labels = with(t.Labels, selector(app))
	t.Annotations = with(t.Annotations, map[string]string{ConfigHashAnnotation: hash})

	i := slices.IndexFunc(t.Spec.Containers, func(c corev1.Container) bool { return c.Name == containerName })
	if i < 0 {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: containerName})
		i = len(t.Spec.Containers) - 1
	}
	c := &t.Spec.Containers[i]
	c.Image = app.Spec.Image
	j := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == portName })
	if j < 0 {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: portName})
		j = len(c.Ports) - 1
	}
	c.Ports[j].ContainerPort = port(app)
	c.Ports[j].Protocol = corev1.ProtocolTCP
	cm := ConfigMapName(app)
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.ConfigMapRef != nil && e.ConfigMapRef.Name == cm }) {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
}

func setService(s *corev1.Service, app *v1alpha1.WebApp) {
	s.Spec.Selector = selector(app)
	i := slices.IndexFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == portName })
	if i < 0 {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: portName})
		i = len(s.Spec.Ports) - 1
	}
	p := &s.Spec.Ports[i]
	p.Port = port(app)
	p.TargetPort = intstr.FromString(portName)
	p.Protocol = corev1.ProtocolTCP
}

// selector selects a WebApp's pods.
func selector(app *v1alpha1.WebApp) map[string]string {
	return map[string]string{labelName: "webapp", LabelInstance: app.Name}
}

// with sets the entries of each of sets in m, allocating m if needed.
func with(m map[string]string, sets ...map[string]string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for _, s := range sets {
		maps.Copy(m, s)
	}
	return m
}

func replicas(app *v1alpha1.WebApp) int32 { return ptr.Deref(app.Spec.Replicas, defaultReplicas) }

func port(app *v1alpha1.WebApp) int32 { return cmp.Or(app.Spec.Port, defaultPort) }
