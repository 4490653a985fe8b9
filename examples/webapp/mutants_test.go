package webapp_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/examples/webapp"
	"github.com/converge-lab/converge/examples/webapp/api/v1alpha1"
)

// A proof runs one scenario and reports what it saw go wrong: the mutant
// must show its bug, and the correct operator, in the same scenario, must
// not. A proof the correct operator fails proves nothing.
type proof struct {
	bug webapp.Bug
	// faults wraps the operator's config, for a proof that needs them.
	faults func(*rest.Config) *rest.Config
	// scenario returns what went wrong, or nothing.
	scenario func(t *testing.T, r *run) []string
}

var proofs = []proof{
	{
		bug: webapp.StaleStatus,
		// A config change: the correct operator reports Available only once
		// the Deployment runs the new config; the mutant reports it before
		// the Deployment is even updated.
		scenario: func(t *testing.T, r *run) []string {
			require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 2, map[string]string{"GREETING": "hello"})))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			r.edit("web", func(s *v1alpha1.WebAppSpec) { s.Config = map[string]string{"GREETING": "bonjour"} })
			r.eventually("the new config is rolled out", func() bool {
				app, d := r.webApp("web"), r.deployment("web")
				return available(app) && app.Generation == 2 &&
					d.Spec.Template.Annotations[webapp.ConfigHashAnnotation] == webapp.ConfigHash(app.Spec.Config)
			})
			r.stop()
			return violations(r, availableOnlyWhenSeen)
		},
	},
	{
		bug: webapp.FinalizerEarly,
		// The WebApp goes, and the garbage collector takes the children:
		// the end state is clean either way. The history is not: the
		// mutant's WebApp is gone while its children still exist, and the
		// operator itself never deleted them.
		scenario: func(t *testing.T, r *run) []string {
			ctx := context.Background()
			require.NoError(t, r.admin.Create(ctx, r.newWebApp("web", 2, nil)))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			require.NoError(t, r.admin.Delete(ctx, r.webApp("web")))
			r.eventually("the WebApp and its children are gone", func() bool {
				return r.webApp("web") == nil && r.deployment("web") == nil && r.service("web") == nil && r.configMap("web-config") == nil
			})
			r.stop()
			got := violations(r, childrenGoneBeforeOwner)
			if n := len(r.meter.where(func(c call) bool { return c.req.Verb == "delete" })); n == 0 {
				got = append(got, "the operator deleted none of the children")
			}
			return got
		},
	},
	{
		bug: webapp.NoOwner,
		// Unowned children: the Deployment's readiness never reaches the
		// status, and the children outlive the WebApp.
		scenario: func(t *testing.T, r *run) []string {
			ctx := context.Background()
			var got []string
			require.NoError(t, r.admin.Create(ctx, r.newWebApp("web", 2, nil)))
			r.eventually("the Deployment has 2 ready pods", func() bool {
				d := r.deployment("web")
				return d != nil && d.Status.ReadyReplicas == 2
			})
			for kind, obj := range map[string]client.Object{"Deployment": r.deployment("web"), "Service": r.service("web"), "ConfigMap": r.configMap("web-config")} {
				if len(obj.GetOwnerReferences()) == 0 {
					got = append(got, fmt.Sprintf("the %s has no owner reference", kind))
				}
			}
			if !within(time.Minute, func() bool { return available(r.webApp("web")) }) {
				app := r.webApp("web")
				got = append(got, fmt.Sprintf("a minute after the Deployment had 2 ready pods, the status says %d ready and not Available", app.Status.ReadyReplicas))
			}
			require.NoError(t, r.admin.Delete(ctx, r.webApp("web")))
			r.eventually("the WebApp is gone", func() bool { return r.webApp("web") == nil })
			if !within(time.Minute, func() bool {
				return r.deployment("web") == nil && r.service("web") == nil && r.configMap("web-config") == nil
			}) {
				got = append(got, "a minute after the WebApp was gone, its children were still there")
			}
			return got
		},
	},
	{
		bug: webapp.RequeueStorm,
		// Once Available, nothing changes: the operator must stop writing.
		scenario: func(t *testing.T, r *run) []string {
			require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 2, nil)))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			before := len(r.meter.writes())
			time.Sleep(30 * time.Second) // a window of virtual time in which nothing changes
			if n := len(r.meter.writes()) - before; n > 0 {
				return []string{fmt.Sprintf("%d writes in the 30 s after convergence", n)}
			}
			return nil
		},
	},
	{
		bug: webapp.IgnoreConflict,
		// The first update of the Deployment, the one that carries the new
		// replica count, is answered 409 without being applied: nothing
		// changes, so no event will ever bring the operator back.
		faults: func(cfg *rest.Config) *rest.Config {
			inj, err := chaos.NewInjector(chaos.Plan{Injections: []chaos.Injection{{
				Fault: chaos.Conflict(chaos.Target{Verbs: []string{"update"}, Resource: "deployments", Name: "web"}),
				When:  chaos.When{Nth: 1},
			}}})
			if err != nil {
				panic(err) // a plan of constants
			}
			return chaos.Configure(cfg, inj)
		},
		scenario: func(t *testing.T, r *run) []string {
			require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 2, nil)))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			r.edit("web", func(s *v1alpha1.WebAppSpec) { s.Replicas = ptr.To[int32](4) })
			if !within(time.Minute, func() bool { return ptr.Deref(r.deployment("web").Spec.Replicas, 0) == 4 }) {
				return []string{fmt.Sprintf("a minute after replicas went to 4, the Deployment still asks for %d", ptr.Deref(r.deployment("web").Spec.Replicas, 0))}
			}
			return nil
		},
	},
	{
		bug: webapp.ScaleUpOnly,
		// Scaled down from 3 to 1: the Deployment must follow.
		scenario: func(t *testing.T, r *run) []string {
			require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 3, nil)))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			r.edit("web", func(s *v1alpha1.WebAppSpec) { s.Replicas = ptr.To[int32](1) })
			if !within(time.Minute, func() bool { return ptr.Deref(r.deployment("web").Spec.Replicas, 0) == 1 }) {
				return []string{fmt.Sprintf("a minute after replicas went to 1, the Deployment still asks for %d", ptr.Deref(r.deployment("web").Spec.Replicas, 0))}
			}
			return nil
		},
	},
	{
		bug: webapp.PortOnCreate,
		// The port changes: the Service must follow the pods.
		scenario: func(t *testing.T, r *run) []string {
			require.NoError(t, r.admin.Create(context.Background(), r.newWebApp("web", 2, nil)))
			r.eventually("the WebApp is Available", func() bool { return available(r.webApp("web")) })
			r.edit("web", func(s *v1alpha1.WebAppSpec) { s.Port = 9090 })
			if !within(time.Minute, func() bool { return r.service("web").Spec.Ports[0].Port == 9090 }) {
				return []string{fmt.Sprintf("a minute after the port went to 9090, the Service still serves %d", r.service("web").Spec.Ports[0].Port)}
			}
			return nil
		},
	},
}

// TestMutants shows that each mutant's bug is real: visible in a run of the
// same setup as TestOperator, and absent from the correct operator's run
// of the same scenario.
func TestMutants(t *testing.T) {
	proven := map[webapp.Bug]bool{}
	for _, p := range proofs {
		proven[p.bug] = true
		t.Run(string(p.bug), func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name string
				bug  webapp.Bug
			}{{"mutant", p.bug}, {"correct", ""}} {
				t.Run(tc.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						r := start(t, setup{bug: tc.bug, wrap: p.faults})
						got := p.scenario(t, r)
						if tc.bug == "" {
							require.Empty(t, got, "the correct operator failed the proof")
						} else {
							require.NotEmpty(t, got, "the mutant passed")
							t.Logf("%s: %q", p.bug, got)
						}
					})
				})
			}
		})
	}
	for _, b := range webapp.Bugs() {
		require.True(t, proven[b.Name], "mutant %s has no proof", b.Name)
	}
}

// violations runs checks on r's history, once every event is in.
func violations(r *run, checks ...func(*history) error) []string {
	synctest.Wait()
	var got []string
	for _, check := range checks {
		if err := check(r.history); err != nil {
			got = append(got, err.Error())
		}
	}
	return got
}
