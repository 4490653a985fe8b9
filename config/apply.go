package config

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// ScalerUser is the user name of the scaler's ServiceAccount, and
// ScalerGroups its groups: a client with this identity (a client
// certificate, or impersonation) is authorized exactly by config/'s RBAC.
const ScalerUser = "system:serviceaccount:converge-system:converge-scaler"

// ScalerGroups are the groups of ScalerUser.
var ScalerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:converge-system", "system:authenticated"}

// ApplyRBAC creates config/'s Namespace, ServiceAccount, roles and bindings,
// leaving the ones that exist alone. It skips the Deployment.
func ApplyRBAC(ctx context.Context, c kubernetes.Interface) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := create(ctx, c, obj); err != nil {
			return fmt.Errorf("applying config/: %w", err)
		}
	}
	return nil
}

func create(ctx context.Context, c kubernetes.Interface, obj runtime.Object) error {
	var err error
	opts := metav1.CreateOptions{}
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = c.CoreV1().Namespaces().Create(ctx, o, opts)
	case *corev1.ServiceAccount:
		_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = c.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	default:
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
