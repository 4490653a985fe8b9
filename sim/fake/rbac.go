package fake

//lint:file-ignore ST1005 a refusal reads as kube-apiserver writes it ("User ... cannot ...")

import (
	"fmt"
	"net/http"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// RBAC on the REST door: a request that impersonates a user (as the
// configs of a controller with a declared identity do) is authorized by
// the Roles, ClusterRoles and bindings stored in the fake, with the rule
// matching of Kubernetes' own RBAC comparator. A request without
// impersonation is the administrator's.

var (
	rolesGVR               = rbacv1.SchemeGroupVersion.WithResource("roles")
	clusterRolesGVR        = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	roleBindingsGVR        = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
	clusterRoleBindingsGVR = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")
)

// user is who a request acts as.
type user struct {
	name   string
	groups []string
}

// impersonated is the user a request impersonates, if it does.
func impersonated(req *http.Request) (user, bool) {
	name := req.Header.Get("Impersonate-User")
	if name == "" {
		return user{}, false
	}
	return user{name: name, groups: req.Header.Values("Impersonate-Group")}, true
}

// verbOf is the RBAC verb of a request.
func verbOf(req *http.Request, rq request) string {
	switch req.Method {
	case http.MethodGet:
		switch {
		case rq.name != "":
			return "get"
		case isTrue(req.URL.Query().Get("watch")):
			return "watch"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if rq.name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return ""
}

// authorize refuses, with the API server's 403, a request u may not make.
func (s *store) authorize(u user, verb string, rq request) error {
	resource := rq.r.gvr.Resource
	if rq.subresource != "" {
		resource += "/" + rq.subresource
	}
	want := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{rq.r.gvr.Group}, Resources: []string{resource}}
	if rq.name != "" {
		want.ResourceNames = []string{rq.name}
	}
	s.mu.Lock()
	rules := s.rulesFor(u, rq.namespace)
	s.mu.Unlock()
	if ok, _ := validation.Covers(rules, []rbacv1.PolicyRule{want}); ok {
		return nil
	}
	scope := fmt.Sprintf("in the namespace %q", rq.namespace)
	if rq.namespace == "" {
		scope = "at the cluster scope"
	}
	return apierrors.NewForbidden(rq.r.groupResource(), rq.name,
		fmt.Errorf("User %q cannot %s resource %q in API group %q %s", u.name, verb, resource, rq.r.gvr.Group, scope))
}

// rulesFor gathers u's rules in namespace ns (cluster-wide ones when ns
// is empty): from the RoleBindings of ns and every ClusterRoleBinding.
// Callers hold s.mu.
func (s *store) rulesFor(u user, ns string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, obj := range s.tables[clusterRoleBindingsGVR] {
		b := obj.(*rbacv1.ClusterRoleBinding)
		if binds(b.Subjects, u, "") {
			rules = append(rules, s.roleRules(b.RoleRef, "")...)
		}
	}
	if ns == "" {
		return rules
	}
	for k, obj := range s.tables[roleBindingsGVR] {
		if k.ns != ns {
			continue
		}
		b := obj.(*rbacv1.RoleBinding)
		if binds(b.Subjects, u, ns) {
			rules = append(rules, s.roleRules(b.RoleRef, ns)...)
		}
	}
	return rules
}

func (s *store) roleRules(ref rbacv1.RoleRef, ns string) []rbacv1.PolicyRule {
	switch ref.Kind {
	case "ClusterRole":
		if r, ok := s.tables[clusterRolesGVR][objKey{"", ref.Name}].(*rbacv1.ClusterRole); ok {
			return r.Rules
		}
	case "Role":
		if r, ok := s.tables[rolesGVR][objKey{ns, ref.Name}].(*rbacv1.Role); ok {
			return r.Rules
		}
	}
	return nil
}

// binds: one of subjects is u, by user name, group or ServiceAccount.
func binds(subjects []rbacv1.Subject, u user, bindingNS string) bool {
	for _, sub := range subjects {
		switch sub.Kind {
		case rbacv1.UserKind:
			if sub.Name == u.name {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.groups, sub.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := sub.Namespace
			if ns == "" {
				ns = bindingNS
			}
			if u.name == "system:serviceaccount:"+ns+":"+sub.Name {
				return true
			}
		}
	}
	return false
}

// authorizeActions makes cs's requests act as u: each is authorized, as on
// the REST door, before the store sees it.
func (s *store) authorizeActions(cs *fake.Clientset, u user) {
	authorize := func(a k8stesting.Action) error {
		verb := a.GetVerb()
		switch verb {
		case "delete-collection":
			verb = "deletecollection"
		case "get":
			if _, ok := a.(k8stesting.GetAction); !ok {
				return nil // the clientset's own discovery
			}
		}
		rq := request{r: s.resourceFor(a.GetResource(), nil), namespace: a.GetNamespace(), subresource: a.GetSubresource()}
		switch act := a.(type) {
		case interface{ GetName() string }:
			rq.name = act.GetName()
		case k8stesting.CreateAction:
			if verb == "update" || rq.subresource != "" {
				if m, err := meta.Accessor(act.GetObject()); err == nil {
					rq.name = m.GetName()
				}
			}
		}
		return s.authorize(u, verb, rq)
	}
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if err := authorize(a); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if err := authorize(a); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
}
