package sim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
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
	// skipped). Namespaced ones without a namespace, and ServiceAccount
	// subjects without one, are put in the run's namespace.
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
	return append(objs, id.RBAC...), nil
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

// ReadRBAC reads the RBAC objects in paths (files of several YAML or JSON
// documents, or folders of them, not recursive).
func ReadRBAC(paths ...string) ([]runtime.Object, error) {
	files, err := manifestFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("RBAC: %w", err)
	}
	var objs []runtime.Object
	for _, f := range files {
		docs, err := readDocuments(f)
		if err != nil {
			return nil, fmt.Errorf("RBAC: %w", err)
		}
		more, err := decodeRBAC(f, docs)
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

// DecodeRBAC is ReadRBAC of one file's content, named name in errors: for
// RBAC a program embeds.
func DecodeRBAC(name string, data []byte) ([]runtime.Object, error) {
	docs, err := splitDocuments(name, data)
	if err != nil {
		return nil, fmt.Errorf("RBAC: %w", err)
	}
	return decodeRBAC(name, docs)
}

// decodeRBAC decodes the ServiceAccounts, Roles, ClusterRoles and bindings
// of docs, strictly; other kinds are skipped.
func decodeRBAC(f string, docs []document) ([]runtime.Object, error) {
	var objs []runtime.Object
	for _, d := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d.raw, &tm); err != nil {
			return nil, fmt.Errorf("RBAC: %s, document %d: %w", f, d.n, err)
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
		if err := yaml.UnmarshalStrict(d.raw, obj); err != nil {
			return nil, fmt.Errorf("RBAC: %s, document %d: %w", f, d.n, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// ApplyRBAC creates the RBAC objects for a run in namespace ns, or updates
// the ones that exist (on a shared control plane another run may have
// made them), and the identity's ServiceAccount.
func (id Identity) ApplyRBAC(ctx context.Context, c kubernetes.Interface, ns string, objs []runtime.Object) error {
	objs = append([]runtime.Object{&corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount},
	}}, objs...)
	for _, obj := range objs {
		obj = obj.DeepCopyObject()
		place(obj, ns)
		if err := applyOne(ctx, c, obj); err != nil {
			m, _ := meta.Accessor(obj)
			return fmt.Errorf("RBAC: applying %T %s: %w", obj, m.GetName(), err)
		}
	}
	return nil
}

// place puts namespaced objects and ServiceAccount subjects without a
// namespace in ns.
func place(obj runtime.Object, ns string) {
	m, _ := meta.Accessor(obj)
	switch o := obj.(type) {
	case *corev1.ServiceAccount, *rbacv1.Role:
		if m.GetNamespace() == "" {
			m.SetNamespace(ns)
		}
	case *rbacv1.RoleBinding:
		if m.GetNamespace() == "" {
			m.SetNamespace(ns)
		}
		placeSubjects(o.Subjects, ns)
	case *rbacv1.ClusterRoleBinding:
		placeSubjects(o.Subjects, ns)
	}
}

func placeSubjects(subjects []rbacv1.Subject, ns string) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind && subjects[i].Namespace == "" {
			subjects[i].Namespace = ns
		}
	}
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

// manifestFiles expands folders into their *.yaml, *.yml and *.json files.
func manifestFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
	}
	return files, nil
}

// document is one YAML document of a file, numbered from 1.
type document struct {
	n   int
	raw []byte
}

// readDocuments reads a manifest file of at most MaxCRDFileSize bytes as
// its non-empty YAML documents.
func readDocuments(path string) ([]document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxCRDFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return splitDocuments(path, data)
}

// splitDocuments is data, of the file named path, as its non-empty YAML
// documents.
func splitDocuments(path string, data []byte) ([]document, error) {
	if len(data) > MaxCRDFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxCRDFileSize)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []document
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", path, n, err)
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			docs = append(docs, document{n, raw})
		}
	}
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
