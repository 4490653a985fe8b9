package webapp_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// permission is one verb on one resource.
type permission struct{ group, resource, verb string }

func (p permission) String() string {
	if p.group == "" {
		return p.verb + " " + p.resource
	}
	return p.verb + " " + p.group + "/" + p.resource
}

// listFallback: why "list" is granted yet never used here.
const listFallback = "informers stream their initial list in a watch (watch-list) where the server can, as the fake " +
	"and kube-apiserver 1.37 both do; a LIST is their fallback on a server that cannot"

// untestable are the permissions whose lack a run on the fake backend
// cannot show, and why.
var untestable = map[permission]string{
	{"examples.converge.dev", "webapps/finalizers", "update"}: "only the OwnerReferencesPermissionEnforcement admission plugin " +
		"asks for it, of whoever sets blockOwnerDeletion on a WebApp's child; the fake runs no admission plugins",
	{"examples.converge.dev", "webapps", "list"}: listFallback,
	{"apps", "deployments", "list"}:              listFallback,
	{"", "services", "list"}:                     listFallback,
	{"", "configmaps", "list"}:                   listFallback,
}

// TestRoleIsLeastPrivilege: the operator needs every permission its Role
// grants. Without any one of them it gets a 403 for exactly that verb and
// resource, in the life of one WebApp with leader election on.
func TestRoleIsLeastPrivilege(t *testing.T) {
	role := readRole(t, "config/rbac/role.yaml")
	all := permissions(role)
	require.NotEmpty(t, all)
	for _, missing := range all {
		t.Run(missing.String(), func(t *testing.T) {
			if why, ok := untestable[missing]; ok {
				t.Skip(why)
			}
			t.Parallel()
			dir := t.TempDir()
			without := role.DeepCopy()
			without.Rules = nil
			for _, p := range all {
				if p != missing {
					without.Rules = append(without.Rules, rbacv1.PolicyRule{APIGroups: []string{p.group}, Resources: []string{p.resource}, Verbs: []string{p.verb}})
				}
			}
			writeYAML(t, filepath.Join(dir, "role.yaml"), without)
			for _, f := range []string{"service_account.yaml", "role_binding.yaml"} {
				data, err := os.ReadFile(filepath.Join("config/rbac", f))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
			}

			synctest.Test(t, func(t *testing.T) {
				r := start(t, setup{rbac: dir, leaderElection: true, failing: true})
				denied := func() bool {
					return slices.ContainsFunc(r.meter.forbidden(), func(c call) bool { return c.permission() == missing })
				}
				lifeOfAWebApp(t, r, denied)
				// Stopped before its informers synced, controller-runtime's
				// namespaced cache leaves a goroutine waiting for their
				// handlers for good, and the bubble fails on it. A missing
				// verb other than list leaves the list, so they sync.
				synced, cancel := context.WithTimeout(context.Background(), time.Minute)
				require.True(t, r.cache.WaitForCacheSync(synced), "the operator's caches did not sync within a minute")
				cancel()
				r.stop() // releasing the Lease is an update
				require.True(t, denied(), "no 403 for %s; 403s: %v", missing, r.meter.forbidden())
			})
		})
	}
}

// lifeOfAWebApp creates a WebApp, changes every field of its spec, deletes
// a child behind the operator's back, and deletes the WebApp, waiting for
// the operator at each step, until done says to stop.
func lifeOfAWebApp(t *testing.T, r *run, done func() bool) {
	ctx := context.Background()
	steps := []struct {
		act  func()
		wait func() bool
	}{
		{
			act: func() {
				require.NoError(t, r.admin.Create(ctx, r.newWebApp("web", 2, map[string]string{"GREETING": "hello"})))
			},
			wait: func() bool { return available(r.webApp("web")) },
		},
		{
			act: func() {
				r.edit("web", func(s *v1alpha1.WebAppSpec) {
					s.Replicas, s.Port, s.Image, s.Config = ptr.To[int32](3), 9090, "nginx:1.28", map[string]string{"GREETING": "bonjour"}
				})
			},
			wait: func() bool { app := r.webApp("web"); return available(app) && app.Generation == 2 },
		},
		{
			act:  func() { require.NoError(t, r.admin.Delete(ctx, r.configMap("web-config"))) },
			wait: func() bool { return r.configMap("web-config") != nil },
		},
		{
			act:  func() { require.NoError(t, r.admin.Delete(ctx, r.webApp("web"))) },
			wait: func() bool { return r.webApp("web") == nil },
		},
	}
	for _, s := range steps {
		s.act()
		within(time.Minute, func() bool { return done() || s.wait() })
		if done() {
			return
		}
	}
}

func (c call) permission() permission {
	res := c.req.Resource
	if c.req.Subresource != "" {
		res += "/" + c.req.Subresource
	}
	return permission{c.req.Group, res, c.req.Verb}
}

func readRole(t *testing.T, path string) *rbacv1.Role {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	role := &rbacv1.Role{}
	require.NoError(t, yaml.UnmarshalStrict(data, role))
	return role
}

// permissions lists a Role's rules one verb and resource at a time.
func permissions(role *rbacv1.Role) []permission {
	var out []permission
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					out = append(out, permission{g, res, v})
				}
			}
		}
	}
	return out
}

func writeYAML(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := yaml.Marshal(obj)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}
