package scenarios_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// The engine knows nothing of the controller it tests: a controller-runtime
// operator of a CRD it has never seen (testdata/widgets), with the
// scenario's own objects, CEL invariants, write rules and goal, judged
// through its declared RBAC. Each bug below breaks exactly what the
// scenario says it should, and the correct controller passes.

var widgetGVK = schema.GroupVersionKind{Group: "example.converge.dev", Version: "v1", Kind: "Widget"}

// widgetBug is one classic bug of the widget controller.
type widgetBug string

const (
	noBug widgetBug = ""
	// overcount reports more ready replicas than asked for.
	overcount widgetBug = "overcount"
	// writesSpec writes the Widget's spec, which is not the controller's.
	writesSpec widgetBug = "writes-spec"
	// deletesConfig deletes and recreates its ConfigMap, which its RBAC
	// does not allow.
	deletesConfig widgetBug = "deletes-config"
	// noStatus never writes status.
	noStatus widgetBug = "no-status"
)

// widgets reconciles each Widget into a ConfigMap of the same name holding
// its replicas, then reports status.ready = spec.replicas and its
// observedGeneration.
type widgets struct {
	c   client.Client
	bug widgetBug
}

func (r *widgets) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.c.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.GetName(), Namespace: w.GetNamespace()}}
	if r.bug == deletesConfig {
		_ = r.c.Delete(ctx, cm)
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.c, cm, func() error {
		cm.Labels = map[string]string{"app": "widgets"}
		cm.Data = map[string]string{"replicas": strconv.FormatInt(replicas, 10)}
		return controllerutil.SetControllerReference(w, cm, r.c.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	switch r.bug {
	case noStatus:
		return ctrl.Result{}, nil
	case writesSpec:
		patch := client.MergeFrom(w.DeepCopy())
		_ = unstructured.SetNestedField(w.Object, replicas, "spec", "replicas")
		w.SetAnnotations(map[string]string{"touched": "yes"})
		if err := r.c.Patch(ctx, w, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	ready := replicas
	if r.bug == overcount {
		ready++
	}
	status := map[string]any{"ready": ready, "observedGeneration": w.GetGeneration()}
	if cur, _, _ := unstructured.NestedMap(w.Object, "status"); equalStatus(cur, status) {
		return ctrl.Result{}, nil
	}
	w.Object["status"] = status
	return ctrl.Result{}, r.c.Status().Update(ctx, w)
}

func equalStatus(a, b map[string]any) bool {
	return len(a) == len(b) && a["ready"] == b["ready"] && a["observedGeneration"] == b["observedGeneration"]
}

func widgetController(bug widgetBug) scenarios.Manager {
	rbac := []string{"testdata/widgets/rbac.yaml"}
	if bug == writesSpec {
		// Its author granted what it writes: what catches it is the
		// scenario's write rules, not RBAC.
		rbac = append(rbac, "testdata/widgets/rbac-patch.yaml")
	}
	return scenarios.Manager{
		ControllerName: "widgets",
		RBAC:           sim.Identity{ServiceAccount: "widget-controller", RBACPaths: rbac},
		Setup: func(mgr manager.Manager, _ scenarios.Instance) error {
			w := &unstructured.Unstructured{}
			w.SetGroupVersionKind(widgetGVK)
			return ctrl.NewControllerManagedBy(mgr).For(w).Owns(&corev1.ConfigMap{}).Named("widgets").
				Complete(&widgets{c: mgr.GetClient(), bug: bug})
		},
	}
}

func runWidgets(t *testing.T, backend string, bug widgetBug) *reports.Result {
	t.Helper()
	s, err := scenarios.Load("testdata/widgets/conflicts.yaml")
	require.NoError(t, err)
	kind, err := backends.Named(backend)
	require.NoError(t, err)
	opts := scenarios.Options{Backend: kind, Seed: 1, Controller: widgetController(bug)}
	var res *reports.Result
	if kind.Virtual() {
		synctest.Test(t, func(t *testing.T) { res = scenarios.Run(t.Context(), s, opts) })
	} else {
		res = scenarios.Run(context.Background(), s, opts)
	}
	require.Empty(t, res.Error)
	return res
}

func brokenInvariants(res *reports.Result) []string {
	var out []string
	for _, v := range res.Violations {
		out = append(out, v.Invariant)
	}
	return out
}

// TestAnyControllerWithItsOwnScenario runs beside the out-of-process
// tests only (parallel tests start once the others have ended): its
// manager's probe reads the process's controller-runtime metrics, which no
// controller out of process adds to.
func TestAnyControllerWithItsOwnScenario(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{fake.Name, envtest.Name} {
		t.Run(backend, func(t *testing.T) {
			if backend == envtest.Name {
				simtest.Require(t)
			}
			res := runWidgets(t, backend, noBug)
			assert.True(t, res.Pass, "%v", res.Reasons)
			assert.Empty(t, res.Violations)
			assert.Equal(t, "widgets", res.Controller)
			assert.Contains(t, res.Invariants, "ready-within-replicas")
			assert.Contains(t, res.Invariants, scenarios.InvWritesAllowed)
			assert.Contains(t, res.Invariants, scenarios.InvNoForbidden)
			if backend == fake.Name {
				// In virtual time the windows meet the controller's first
				// writes; on a loaded real control plane its caches may sync
				// after the 20 s windows have closed.
				assert.Empty(t, res.Unfired, "every fault fired")
			}
			assert.Positive(t, res.Counters.Writes["configmaps/w-0"], "writes are counted per object")
			fields := map[string]bool{}
			for _, se := range res.History.Series {
				if se.Kind == "example.converge.dev/v1 Widget" && se.Name == "w-0" {
					fields[se.Field] = len(se.Points) > 0
				}
			}
			assert.Equal(t, map[string]bool{"status.ready": true, "spec.replicas": true, "status.observedGeneration": true, "metadata.generation": true}, fields,
				"the fields the invariants and goal name are charted per object")
			assert.Positive(t, res.Counters.Reconciles, "the manager is probed from its metrics")
		})
	}
}

func TestBugsBreakWhatTheScenarioSays(t *testing.T) {
	for bug, want := range map[widgetBug]string{
		overcount:     "ready-within-replicas",
		writesSpec:    scenarios.InvWritesAllowed,
		deletesConfig: scenarios.InvNoForbidden,
	} {
		t.Run(string(bug), func(t *testing.T) {
			res := runWidgets(t, fake.Name, bug)
			assert.False(t, res.Pass)
			assert.Contains(t, brokenInvariants(res), want, "%v", res.Reasons)
		})
	}
	t.Run(string(noStatus), func(t *testing.T) {
		res := runWidgets(t, fake.Name, noStatus)
		assert.False(t, res.Converged)
		assert.Empty(t, res.Violations)
		require.NotEmpty(t, res.Reasons)
		assert.Contains(t, res.Reasons[len(res.Reasons)-1], "goal.objects[0]: Widget w-0")
	})
}

// Each finding is data: the check, its kind, the object, the instant and
// the request it follows; the reasons are only their sentences.
func TestFindingsAreData(t *testing.T) {
	for bug, want := range map[widgetBug]reports.Finding{
		overcount:     {Check: "ready-within-replicas", Kind: reports.KindInvariant, Subject: reports.Subject{Kind: "Widget"}},
		writesSpec:    {Check: scenarios.InvWritesAllowed, Kind: reports.KindWriteRule, Subject: reports.Subject{Resource: "widgets"}},
		deletesConfig: {Check: scenarios.InvNoForbidden, Kind: reports.KindForbidden, Subject: reports.Subject{Resource: "configmaps"}},
		noStatus:      {Check: reports.CheckGoal, Kind: reports.KindGoal},
	} {
		t.Run(string(bug), func(t *testing.T) {
			res := runWidgets(t, fake.Name, bug)
			assert.Equal(t, reports.Sentences(res.Findings, res.Started), res.Reasons)
			i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == want.Check })
			require.GreaterOrEqual(t, i, 0, "no finding of %s in %v", want.Check, res.Reasons)
			f := res.Findings[i]
			assert.Equal(t, want.Kind, f.Kind)
			assert.False(t, f.At.Before(res.Started), "at %v, before the run's start %v", f.At, res.Started)
			if want.Kind == reports.KindGoal {
				assert.Equal(t, res.Deadline, f.Within)
				return
			}
			assert.Equal(t, want.Subject.Kind, f.Subject.Kind)
			assert.Equal(t, want.Subject.Resource, f.Subject.Resource)
			assert.True(t, strings.HasPrefix(f.Subject.Name, "w-"), "subject %+v", f.Subject)
			if want.Subject.Resource != "" {
				require.NotNil(t, f.Request, "a finding about a request names it")
				assert.Equal(t, f.Subject.Name, f.Request.Name)
				assert.Contains(t, res.History.Requests, *f.Request, "the request is one of the history's")
			}
		})
	}
}

// The forbidden request is named with its verb, resource and namespace,
// and how many followed it.
func TestForbiddenRequestIsNamed(t *testing.T) {
	res := runWidgets(t, fake.Name, deletesConfig)
	var v reports.Violation
	for _, x := range res.Violations {
		if x.Invariant == scenarios.InvNoForbidden {
			v = x
		}
	}
	require.NotEmpty(t, v.Detail)
	assert.Contains(t, v.Detail, "the controller's delete configmaps/w-")
	assert.Contains(t, v.Detail, "was refused with 403")
	assert.True(t, strings.Contains(v.Detail, "more requests after it") || !strings.Contains(v.Detail, "and"), v.Detail)
	_ = time.Second
}

// The fault profiles apply to a controller the catalogue has never seen:
// its one fault-free scenario runs under each of them, with
// controller-runtime's priority queue and with its plain one, whose
// metrics may go to another registry (see gather).
func TestFaultProfilesApplyToAnyController(t *testing.T) {
	base, err := scenarios.LoadDir("testdata/widgets/base")
	require.NoError(t, err)
	all, err := scenariotest.UnderFaults(base)
	require.NoError(t, err)
	profiles, err := scenarios.FaultProfiles()
	require.NoError(t, err)
	require.Len(t, all, 1+len(profiles))
	plain := widgetController(noBug)
	plain.Options = func(o *manager.Options) { o.Controller.UsePriorityQueue = ptr.To(false) }
	for _, q := range []struct {
		name string
		c    scenarios.Manager
	}{{"priority-queue", widgetController(noBug)}, {"plain-queue", plain}} {
		for _, s := range all {
			if !s.RunsOn(fake.Name) {
				continue
			}
			t.Run(q.name+"/"+s.Name, func(t *testing.T) {
				var res *reports.Result
				synctest.Test(t, func(t *testing.T) {
					res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: q.c})
				})
				require.Empty(t, res.Error)
				assert.True(t, res.Pass, "%v", res.Reasons)
				assert.Empty(t, res.Unfired)
			})
		}
	}
}
