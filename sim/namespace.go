package sim

import (
	"context"
	"fmt"
	"strings"
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
	return DeleteRunNamespaceContext(context.Background(), c, name, within)
}

// DeleteRunNamespaceContext is DeleteRunNamespace that gives up when ctx
// ends, with its cause: a backend whose control plane can no longer delete
// a namespace (its controller manager is gone) ends the wait at once.
func DeleteRunNamespaceContext(parent context.Context, c kubernetes.Interface, name string, within time.Duration) error {
	if cause := context.Cause(parent); cause != nil {
		return fmt.Errorf("namespace %s not deleted: %w", name, cause)
	}
	ctx, cancel := context.WithTimeout(parent, max(within, 30*time.Second))
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
		if cause := context.Cause(parent); cause != nil {
			return fmt.Errorf("namespace %s not deleted: %w", name, cause)
		}
		return fmt.Errorf("namespace %s still there after %s%s", name, within, namespaceConditions(c, name))
	}
	return nil
}

// namespaceConditions is what the namespace controller says of a namespace
// it has not deleted (content remaining, a discovery failure...), for the
// error that reports it.
func namespaceConditions(c kubernetes.Interface, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var said []string
	for _, cond := range ns.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			said = append(said, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	if len(said) == 0 {
		return " (the namespace controller has written no condition: is it running?)"
	}
	return " (" + strings.Join(said, "; ") + ")"
}
