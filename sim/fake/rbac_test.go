package fake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRBACOnTheRESTDoor: an impersonating request is allowed exactly what
// the stored RBAC grants: verbs, resource names, subresources, wildcards,
// groups and cluster-wide bindings.
func TestRBACOnTheRESTDoor(t *testing.T) {
	_, env := start(t)
	ctx := context.Background()
	admin := env.Observer
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"mine"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}, Verbs: []string{"*"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "r"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "ops"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"mine", "theirs"} {
		_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = admin.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)

	as := func(user string, groups ...string) kubernetes.Interface {
		cfg := rest.CopyConfig(env.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		c, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		return c
	}
	alice, bob := as("alice"), as("bob", "ops")
	allowed := func(what string, err error) { assert.NoError(t, err, what) }
	denied := func(what string, err error) {
		assert.True(t, apierrors.IsForbidden(err), "%s: %v", what, err)
	}

	_, err = alice.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{})
	allowed("alice gets the ConfigMap named in her rule", err)
	_, err = alice.CoreV1().ConfigMaps(ns).Get(ctx, "theirs", metav1.GetOptions{})
	denied("alice gets another ConfigMap", err)
	_, err = alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	denied("alice lists ConfigMaps (resourceNames do not grant lists)", err)
	_, err = alice.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	denied("alice reads deployments/scale", err)
	dep, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = alice.AppsV1().Deployments(ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	allowed("alice writes deployments/status (a wildcard verb)", err)
	_, err = alice.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{})
	denied("alice writes the Deployment itself", err)
	_, err = bob.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	allowed("bob lists Nodes through his group's ClusterRoleBinding", err)
	_, err = bob.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{})
	denied("bob has no Role in the namespace", err)
	assert.Contains(t, err.Error(), `User "bob" cannot get resource "configmaps" in API group "" in the namespace "converge"`)
	_, err = alice.Discovery().ServerGroups()
	allowed("discovery is open to every user", err)
}
