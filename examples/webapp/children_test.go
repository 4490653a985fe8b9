package webapp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

func TestConfigHash(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]string
		same bool
	}{
		{"nil and empty", nil, map[string]string{}, true},
		{"equal maps", map[string]string{"a": "1", "b": "2"}, map[string]string{"b": "2", "a": "1"}, true},
		{"a value changes", map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{"a key changes", map[string]string{"a": "1"}, map[string]string{"b": "1"}, false},
		{"a key is added", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": ""}, false},
		{"the boundary between key and value moves", map[string]string{"ab": "c"}, map[string]string{"a": "bc"}, false},
		{"the boundary between entries moves", map[string]string{"a": "1b", "c": ""}, map[string]string{"a": "1", "bc": ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ha, hb := ConfigHash(tc.a), ConfigHash(tc.b)
			assert.Len(t, ha, 16)
			assert.Equal(t, tc.same, ha == hb, "%s vs %s", ha, hb)
		})
	}
}

func webApp() *v1alpha1.WebApp {
	return &v1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Generation: 3},
		Spec:       v1alpha1.WebAppSpec{Replicas: ptr.To[int32](2), Image: "nginx:1.27", Port: 8080, Config: map[string]string{"A": "1"}},
	}
}

// defaulted is what an API server and other controllers make of the
// children: defaults filled, their own labels and annotations added.
func defaulted(obj client.Object) {
	obj.SetLabels(with(obj.GetLabels(), map[string]string{"team": "web"}))
	obj.SetAnnotations(with(obj.GetAnnotations(), map[string]string{"deployment.kubernetes.io/revision": "1"}))
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		o.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
		o.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
		s := &o.Spec.Template.Spec
		s.RestartPolicy, s.DNSPolicy, s.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
		s.TerminationGracePeriodSeconds = ptr.To[int64](30)
		c := &s.Containers[0]
		c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		o.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"
	case *corev1.Service:
		o.Spec.Type, o.Spec.ClusterIP, o.Spec.ClusterIPs = corev1.ServiceTypeClusterIP, "10.0.0.7", []string{"10.0.0.7"}
		o.Spec.SessionAffinity = corev1.ServiceAffinityNone
		o.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetResourceVersion("7")
}

// TestSetChildIsStable: setting a child the server returned, with its
// defaults and other controllers' fields, changes nothing, so a converged
// operator does not write.
func TestSetChildIsStable(t *testing.T) {
	app := webApp()
	hash := ConfigHash(app.Spec.Config)
	for _, c := range childrenOf(app) {
		t.Run(c.kind, func(t *testing.T) {
			setChild(c.obj, app, hash)
			defaulted(c.obj)
			stored := c.obj.DeepCopyObject()
			setChild(c.obj, app, hash)
			assert.True(t, apiequality.Semantic.DeepEqual(stored, c.obj), "setting a stored %s changed it", c.kind)
		})
	}
}

// TestSetChildFollowsTheSpec: a changed spec reaches each child, and what
// others added stays.
func TestSetChildFollowsTheSpec(t *testing.T) {
	app := webApp()
	children := childrenOf(app)
	for _, c := range children {
		setChild(c.obj, app, ConfigHash(app.Spec.Config))
		defaulted(c.obj)
	}
	app.Spec = v1alpha1.WebAppSpec{Replicas: ptr.To[int32](0), Image: "nginx:1.28", Port: 9090, Config: map[string]string{"B": "2"}}
	hash := ConfigHash(app.Spec.Config)
	for _, c := range children {
		setChild(c.obj, app, hash)
	}

	cm := children[0].obj.(*corev1.ConfigMap)
	assert.Equal(t, app.Spec.Config, cm.Data)

	d := children[1].obj.(*appsv1.Deployment)
	assert.Equal(t, ptr.To[int32](0), d.Spec.Replicas)
	assert.Equal(t, map[string]string{labelName: "webapp", LabelInstance: "web"}, d.Spec.Selector.MatchLabels)
	assert.Equal(t, hash, d.Spec.Template.Annotations[ConfigHashAnnotation])
	assert.Equal(t, "2026-01-01T00:00:00Z", d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "nginx:1.28", c.Image)
	assert.Equal(t, []corev1.ContainerPort{{Name: "http", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}, c.Ports)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Len(t, c.EnvFrom, 1)

	s := children[2].obj.(*corev1.Service)
	require.Len(t, s.Spec.Ports, 1)
	assert.Equal(t, int32(9090), s.Spec.Ports[0].Port)
	assert.Equal(t, "10.0.0.7", s.Spec.ClusterIP)

	for _, c := range children {
		assert.Equal(t, "web", c.obj.GetLabels()["team"], "%s keeps others' labels", c.kind)
	}
}

// TestSetChildDefaults: a WebApp no server defaulted gets the schema's
// defaults.
func TestSetChildDefaults(t *testing.T) {
	app := webApp()
	app.Spec.Replicas, app.Spec.Port = nil, 0
	d := &appsv1.Deployment{}
	setChild(d, app, "h")
	assert.Equal(t, ptr.To[int32](1), d.Spec.Replicas)
	assert.Equal(t, int32(8080), d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)
}
