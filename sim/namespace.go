package sim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
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

// DeleteRunNamespace deletes a run's namespace and waits, up to within,
// until it is gone, so that the next run does not share the control plane's
// controllers with this one's teardown. The namespace controller removes
// what was in it; pods, which nothing may run to their end (envtest has no
// kubelet, and the world has stopped), are deleted at once. A namespace
// still there after within is an error.
func DeleteRunNamespace(c kubernetes.Interface, name string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(within, 30*time.Second))
	defer cancel()
	err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || within <= 0 {
		return err
	}
	// Once the namespace is terminating nothing new is created in it, so
	// what is deleted here stays deleted.
	pods := c.CoreV1().Pods(name)
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		if _, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return true, nil
		}
		_ = pods.DeleteCollection(ctx, now, metav1.ListOptions{})
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s still there after %s", name, within)
	}
	return nil
}
