package sim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LabelRun marks the namespaces backends create for runs.
const LabelRun = "converge.dev/run"

// CreateRunNamespace creates a namespace named prefix plus a random suffix,
// for one run on a real API server, and returns its name.
func CreateRunNamespace(ctx context.Context, c kubernetes.Interface, prefix string) (string, error) {
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: map[string]string{LabelRun: "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating the run's namespace: %w", err)
	}
	return ns.Name, nil
}

// DeleteRunNamespace deletes a run's namespace; the namespace controller
// removes what is in it. It does not wait for that.
func DeleteRunNamespace(c kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
