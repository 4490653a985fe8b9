package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/internal/manifest"
	"github.com/converge-lab/converge/internal/userfile"
)

// Identity is who the controller under test is, and the RBAC it declares:
// envtest and cluster apply the RBAC and give the controller a config that
// acts as that identity, so a missing permission fails as it would in
// production. The zero value is the scaler's identity and config/'s RBAC.
type Identity struct {
	// ServiceAccount is the controller's ServiceAccount in the run's
	// namespace; it is created if the RBAC files do not hold it.
	ServiceAccount string
	// RBACPaths are files or folders of ServiceAccounts, Roles,
	// ClusterRoles, RoleBindings and ClusterRoleBindings (other kinds are
	// skipped), or kustomizations that build them (a kubebuilder
	// project's config/rbac, read as kustomize builds it). They are put
	// in the run's namespace as Place says, whatever namespace they name.
	RBACPaths []string
	// RBAC are more such objects, given as values.
	RBAC []runtime.Object
}

// IsZero: no identity was given.
func (id Identity) IsZero() bool {
	return id.ServiceAccount == "" && len(id.RBACPaths) == 0 && len(id.RBAC) == 0
}

// Validate checks the identity's names and reads its RBAC files, so that a
// bad one fails before any run.
func (id Identity) Validate() ([]runtime.Object, error) {
	if id.IsZero() {
		return nil, nil
	}
	if msgs := validation.IsDNS1123Subdomain(id.ServiceAccount); len(msgs) > 0 {
		return nil, fmt.Errorf("identity: service account %q: %s", id.ServiceAccount, strings.Join(msgs, "; "))
	}
	objs, err := ReadRBAC(id.RBACPaths...)
	if err != nil {
		return nil, err
	}
	objs = append(objs, id.RBAC...)
	if err := id.bound(objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// bound is an error when objs bind ServiceAccounts but not the identity's:
// the controller would run with none of the permissions they grant (a
// kustomization with a namePrefix renames the ServiceAccount too).
func (id Identity) bound(objs []runtime.Object) error {
	var others []string
	for _, obj := range objs {
		var subjects []rbacv1.Subject
		switch o := obj.(type) {
		case *rbacv1.RoleBinding:
			subjects = o.Subjects
		case *rbacv1.ClusterRoleBinding:
			subjects = o.Subjects
		}
		for _, s := range subjects {
			switch {
			case s.Kind == rbacv1.GroupKind && strings.HasPrefix(s.Name, "system:serviceaccounts"):
				return nil // every ServiceAccount, or a namespace's
			case s.Kind != rbacv1.ServiceAccountKind:
			case s.Name == id.ServiceAccount:
				return nil
			case !slices.Contains(others, s.Name):
				others = append(others, s.Name)
			}
		}
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("identity: service account %q is bound by none of the RBAC's bindings, which bind %s: name one of those", id.ServiceAccount, strings.Join(others, ", "))
}

// User is the identity's user name and groups in namespace ns, as the API
// server authenticates a ServiceAccount's token.
func (id Identity) User(ns string) (string, []string) {
	return "system:serviceaccount:" + ns + ":" + id.ServiceAccount,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// Config is admin's config acting as the identity in ns (impersonation).
func (id Identity) Config(admin *rest.Config, ns string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	user, groups := id.User(ns)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// ReadRBAC reads the RBAC objects in paths: files of several YAML or JSON
// documents, folders of them (not recursive), or kustomizations, built as
// kustomize builds them (a kubebuilder project's config/rbac).
func ReadRBAC(paths ...string) ([]runtime.Object, error) {
	docs, err := readPaths(paths)
	if err != nil {
		return nil, fmt.Errorf("RBAC: %w", err)
	}
	return decodeRBAC(docs)
}

// DecodeRBAC is ReadRBAC of one file's content, named name in errors: for
// RBAC a program embeds.
func DecodeRBAC(name string, data []byte) ([]runtime.Object, error) {
	if len(data) > MaxCRDFileSize {
		return nil, fmt.Errorf("RBAC: %s is larger than %d bytes", name, MaxCRDFileSize)
	}
	docs, err := manifest.Split(name, data)
	if err != nil {
		return nil, fmt.Errorf("RBAC: %w", err)
	}
	return decodeRBAC(docs)
}

// decodeRBAC decodes the ServiceAccounts, Roles, ClusterRoles and bindings
// of docs, strictly; other kinds are skipped.
func decodeRBAC(docs []manifest.Doc) ([]runtime.Object, error) {
	var objs []runtime.Object
	for _, d := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d.Raw, &tm); err != nil {
			return nil, fmt.Errorf("RBAC: %s, document %d: %w", d.Source, d.N, err)
		}
		var obj runtime.Object
		switch tm.GroupVersionKind() {
		case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
			obj = &corev1.ServiceAccount{}
		case rbacv1.SchemeGroupVersion.WithKind("Role"):
			obj = &rbacv1.Role{}
		case rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):
			obj = &rbacv1.ClusterRole{}
		case rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):
			obj = &rbacv1.RoleBinding{}
		case rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(d.Raw, obj); err != nil {
			return nil, fmt.Errorf("RBAC: %s, document %d: %w", d.Source, d.N, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// ApplyRBAC creates the RBAC objects for a run in namespace ns, placed
// there as Place says, or updates the ones that exist (on a shared control
// plane another run may have made them), and the identity's
// ServiceAccount.
func (id Identity) ApplyRBAC(ctx context.Context, c kubernetes.Interface, ns string, objs []runtime.Object) error {
	objs = append([]runtime.Object{&corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount},
	}}, objs...)
	var owner []metav1.OwnerReference
	if n, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: n.Name, UID: n.UID}}
	}
	for _, obj := range Place(objs, ns) {
		m, _ := meta.Accessor(obj)
		if m.GetNamespace() == "" {
			// Deleted with the run's namespace, by the garbage collector.
			m.SetOwnerReferences(owner)
		}
		if err := applyOne(ctx, c, obj); err != nil {
			return fmt.Errorf("RBAC: applying %s %s: %w", rbacKind(obj), m.GetName(), err)
		}
	}
	return nil
}

// Place is objs as a run in namespace ns applies them (copies; objs are
// left as they are). A controller's RBAC names the namespace it is
// deployed to (kubebuilder's config/rbac names "system"), and each run
// has a namespace of its own:
//   - ServiceAccounts, Roles and RoleBindings, whatever namespace they
//     name, are put in ns;
//   - a ServiceAccount subject is put in ns when it names no namespace or
//     one of those objects' namespaces;
//   - ClusterRoles and ClusterRoleBindings are the run's own, named
//     "<name>.<ns>" (references to them follow), so that runs side by side
//     on one control plane do not rebind each other's subjects.
func Place(objs []runtime.Object, ns string) []runtime.Object {
	homes := map[string]bool{"": true}
	clusterRoles := map[string]bool{}
	for _, obj := range objs {
		m, _ := meta.Accessor(obj)
		switch obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding:
			homes[m.GetNamespace()] = true
		case *rbacv1.ClusterRole:
			clusterRoles[m.GetName()] = true
		}
	}
	own := func(name string) string { return name + "." + ns }
	ref := func(r *rbacv1.RoleRef) {
		if r.Kind == "ClusterRole" && clusterRoles[r.Name] {
			r.Name = own(r.Name)
		}
	}
	subjects := func(subjects []rbacv1.Subject) {
		for i := range subjects {
			if subjects[i].Kind == rbacv1.ServiceAccountKind && homes[subjects[i].Namespace] {
				subjects[i].Namespace = ns
			}
		}
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, obj := range objs {
		obj = obj.DeepCopyObject()
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = ns
		case *rbacv1.Role:
			o.Namespace = ns
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			ref(&o.RoleRef)
			subjects(o.Subjects)
		case *rbacv1.ClusterRole:
			o.Name = own(o.Name)
		case *rbacv1.ClusterRoleBinding:
			o.Name = own(o.Name)
			ref(&o.RoleRef)
			subjects(o.Subjects)
		}
		out = append(out, obj)
	}
	return out
}

// Placed says, in a line, what Place maps for objs: the namespaces it
// replaces by the run's and how cluster-wide objects are named; "" when
// it maps nothing.
func Placed(objs []runtime.Object) string {
	var homes []string
	cluster := 0
	for _, obj := range objs {
		m, _ := meta.Accessor(obj)
		switch obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding:
			if ns := m.GetNamespace(); ns != "" && !slices.Contains(homes, ns) {
				homes = append(homes, ns)
			}
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			cluster++
		}
	}
	var parts []string
	if len(homes) > 0 {
		slices.Sort(homes)
		parts = append(parts, fmt.Sprintf("namespace %s, named by the RBAC, is each run's own namespace", strings.Join(homes, ", ")))
	}
	if cluster > 0 {
		parts = append(parts, fmt.Sprintf("its %d ClusterRoles and ClusterRoleBindings are each run's own, named <name>.<run namespace>", cluster))
	}
	return strings.Join(parts, "; ")
}

// rbacKind is obj's kind as the RBAC files write it.
func rbacKind(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.ClusterRole:
		return "ClusterRole"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	case *rbacv1.ClusterRoleBinding:
		return "ClusterRoleBinding"
	}
	return fmt.Sprintf("%T", obj)
}

func applyOne(ctx context.Context, c kubernetes.Interface, obj runtime.Object) error {
	create := metav1.CreateOptions{}
	update := metav1.UpdateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		if _, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *rbacv1.Role:
		if _, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = c.RbacV1().Roles(o.Namespace).Update(ctx, o, update)
		}
	case *rbacv1.ClusterRole:
		if _, err = c.RbacV1().ClusterRoles().Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = c.RbacV1().ClusterRoles().Update(ctx, o, update)
		}
	case *rbacv1.RoleBinding:
		if _, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = c.RbacV1().RoleBindings(o.Namespace).Update(ctx, o, update)
		}
	case *rbacv1.ClusterRoleBinding:
		if _, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = c.RbacV1().ClusterRoleBindings().Update(ctx, o, update)
		}
	}
	return err
}

// manifestLimits bound what one path of CRDs or RBAC reads, a
// kustomization's files included.
var manifestLimits = manifest.Limits{File: MaxCRDFileSize, Total: 10 * MaxCRDFileSize}

// readPaths reads the documents of each path: a file, a folder's files, or
// what a kustomization builds (manifest.Read).
func readPaths(paths []string) ([]manifest.Doc, error) {
	var out []manifest.Doc
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		docs, err := manifest.Read(userfile.FS("/"), strings.TrimPrefix(filepath.ToSlash(abs), "/"), manifestLimits)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

// WaitEffective returns once the API server's authorizer lets the identity
// do what the first plain rule of its Roles or ClusterRoles grants (asked
// with a SubjectAccessReview), or after timeout: RBAC reaches the
// authorizer through its informers a moment after the objects are stored,
// and a controller started in that moment is refused what it was granted.
func (id Identity) WaitEffective(ctx context.Context, c kubernetes.Interface, ns string, objs []runtime.Object, timeout time.Duration) error {
	attrs := firstGrant(objs, ns)
	if attrs == nil {
		return nil
	}
	user, groups := id.User(ns)
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		got, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		switch {
		case err == nil && got.Status.Allowed:
			return nil
		case err == nil:
			last = fmt.Errorf("not allowed yet: %s", got.Status.Reason)
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("RBAC: %s may still not %s %s after %v: %w", user, attrs.Verb, attrs.Resource, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// firstGrant is what the first rule without wildcards or resource names
// among objs' Roles and ClusterRoles grants, in ns.
func firstGrant(objs []runtime.Object, ns string) *authorizationv1.ResourceAttributes {
	for _, obj := range objs {
		var rules []rbacv1.PolicyRule
		switch o := obj.(type) {
		case *rbacv1.Role:
			rules = o.Rules
		case *rbacv1.ClusterRole:
			rules = o.Rules
		}
		for _, r := range rules {
			if len(r.Verbs) == 0 || len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.ResourceNames) > 0 ||
				r.Verbs[0] == "*" || r.APIGroups[0] == "*" || r.Resources[0] == "*" {
				continue
			}
			resource, sub, _ := strings.Cut(r.Resources[0], "/")
			return &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: resource, Subresource: sub}
		}
	}
	return nil
}
