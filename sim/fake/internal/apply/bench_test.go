package apply

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// liveDeployment is a small Deployment as the store keeps it after an apply.
func liveDeployment(b *testing.B, m *Manager) *appsv1.Deployment {
	b.Helper()
	obj, err := m.Apply(context.Background(), nil, []byte(aliceApply), "alice", "", false)
	if err != nil {
		b.Fatal(err)
	}
	d := obj.(*appsv1.Deployment)
	d.UID = "uid-1"
	return d
}

// BenchmarkUpdate is one non-apply write of a small Deployment: what every
// update and patch costs on top of the store.
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	m, err := ForBuiltin(deploymentGVK)
	if err != nil {
		b.Fatal(err)
	}
	live := liveDeployment(b, m)
	writes := []*appsv1.Deployment{live.DeepCopy(), live.DeepCopy()}
	writes[0].Spec.Replicas = ptr.To[int32](3)
	writes[1].Spec.Replicas = ptr.To[int32](4)
	i := 0
	for b.Loop() {
		if _, err := m.Update(ctx, live, writes[i%2], "scaler", ""); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkApply is one server-side apply to a small Deployment that
// changes a field.
func BenchmarkApply(b *testing.B) {
	ctx := context.Background()
	m, err := ForBuiltin(deploymentGVK)
	if err != nil {
		b.Fatal(err)
	}
	live := liveDeployment(b, m)
	patches := [][]byte{
		[]byte(strings.Replace(aliceApply, "replicas: 2", "replicas: 3", 1)),
		[]byte(strings.Replace(aliceApply, "replicas: 2", "replicas: 4", 1)),
	}
	i := 0
	for b.Loop() {
		if _, err := m.Apply(ctx, live, patches[i%2], "alice", "", false); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkForBuiltin is a manager for a built-in kind once the schema is
// parsed (TestForBuiltin logs the first call).
func BenchmarkForBuiltin(b *testing.B) {
	for b.Loop() {
		if _, err := ForBuiltin(deploymentGVK); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForCRD is a manager for one version of a small CRD.
func BenchmarkForCRD(b *testing.B) {
	crd := widgetCRDObject(b)
	for b.Loop() {
		if _, err := ForCRD(crd, "v1"); err != nil {
			b.Fatal(err)
		}
	}
}
