package scenarios_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/explore"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

// A scenario may run other controllers beside the one under test, on the
// same API: the scaler beside a controller of the test's own, each as its
// own service account, faulted and judged apart, and a fight between them
// over one field caught.

// deploymentSyncer is a small client-go controller: an informer of the
// run's Deployments, a rate-limited queue, and sync for each of them.
type deploymentSyncer struct {
	name string
	sync func(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) error
}

func (d deploymentSyncer) Name() string { return d.name }

func (d deploymentSyncer) New(in scenarios.Instance) (scenarios.Runner, error) {
	return &syncerRun{deploymentSyncer: d, in: in}, nil
}

type syncerRun struct {
	deploymentSyncer
	in scenarios.Instance
}

func (r *syncerRun) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(r.in.Client, 0, informers.WithNamespace(r.in.Namespace), informers.WithTransform(r.in.CacheTransform))
	deployments := factory.Apps().V1().Deployments()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := deployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), deployments.Informer().HasSynced) {
		return ctx.Err()
	}
	stop := context.AfterFunc(ctx, queue.ShutDown)
	defer stop()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		d, err := deployments.Lister().Deployments(ns).Get(name)
		if err == nil {
			err = r.sync(ctx, r.in.Client, d)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// labeler writes a label of its own on each Deployment.
var labeler = deploymentSyncer{name: "labeler", sync: func(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) error {
	if d.Labels["labeler.example/seen"] == "yes" {
		return nil
	}
	_, err := c.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"labeler.example/seen":"yes"}}}`), metav1.PatchOptions{})
	return err
}}

// mirror keeps a ConfigMap of its own per Deployment, holding its replicas.
var mirror = deploymentSyncer{name: "mirror", sync: func(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) error {
	want := strconv.Itoa(int(*d.Spec.Replicas))
	cms := c.CoreV1().ConfigMaps(d.Namespace)
	cm, err := cms.Get(ctx, d.Name+"-mirror", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-mirror"}, Data: map[string]string{"replicas": want}}, metav1.CreateOptions{})
		return err
	case err != nil || cm.Data["replicas"] == want:
		return err
	}
	_, err = cms.Patch(ctx, cm.Name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"replicas":%q}}`, want), metav1.PatchOptions{})
	return err
}}

// fighter, the mutant, holds every managed Deployment at 2 replicas: the
// scaler's field.
var fighter = deploymentSyncer{name: "fighter", sync: func(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment) error {
	if d.Labels["converge.dev/scaler"] != "enabled" || *d.Spec.Replicas == 2 {
		return nil
	}
	_, err := c.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
	return err
}}

func loadPair(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Load("testdata/others/pair.yaml")
	require.NoError(t, err)
	return s
}

// runPair runs s on fake with the scaler under test and other as the
// scenario's other controller.
func runPair(t *testing.T, s *scenarios.Scenario, other scenarios.Controller, seed uint64) *reports.Result {
	t.Helper()
	var res *reports.Result
	synctest.Test(t, func(t *testing.T) {
		res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: seed, Controller: scaler.Controller{},
			Others: map[string]scenarios.Controller{"other": other}})
	})
	require.Empty(t, res.Error)
	return res
}

func findingsOf(res *reports.Result, check string) []reports.Finding {
	var out []reports.Finding
	for _, f := range res.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

func TestOthersAreCheckedAtLoad(t *testing.T) {
	const head = "name: a\ncatches: x\n"
	for doc, want := range map[string][]string{
		"others:\n  - {name: b}\n  - {name: b}\n": {`s.yaml:5: others[1].name: "b" is given twice`},
		"others:\n  - {instances: 1}\n":           {"s.yaml:4: others[0].name: required"},
		"others:\n  - {name: ../etc}\n":           {`others[0].name: "../etc": use lower-case letters`},
		"others:\n  - {name: \"Big Name\"}\n":     {`others[0].name: "Big Name": use lower-case letters`},
		"others:\n  - {name: a-very-long-name-that-goes-on-and-on-past-what-a-lease-can-hold}\n": {"others[0].name: at most 57 characters"},
		"controller: {name: mine}\n": {"s.yaml:3: controller.name: the controller under test is named by its Go value"},
		"others:\n  - {name: b}\nfaults:\n  - {fault: conflict, controller: c}\n":                      {`s.yaml:6: faults[0].controller: "c": no such controller among the others ("b")`},
		"faults:\n  - {fault: conflict, controller: c}\n":                                              {`faults[0].controller: "c": no such controller among the others (none)`},
		"others:\n  - {name: b}\nfaults:\n  - {fault: compaction, controller: b, when: {after: 1s}}\n": {"faults[0].controller: compaction acts on the control plane at its time, not on one controller's requests"},
		"others:\n  - {name: b, rbac: [{manifest: {apiVersion: v1, kind: Role}}]}\n":                   {"others[0].rbac[0]: v1 Role is not RBAC", "others[0].serviceAccount: RBAC is given for a service account: name it"},
		"others:\n  - {name: b, serviceAccount: Bad_SA}\n":                                             {`others[0].serviceAccount: "Bad_SA"`},
		"others:\n  - {name: b, serviceAccount: sa, rbac: [{file: nowhere.yaml}]}\n":                   {"others[0].rbac[0].file"},
		"others:\n  - {name: b, instances: 11, leaseDuration: 10ms}\n":                                 {"others[0].instances: must be within 0..10", "others[0].leaseDuration: at least 1s"},
		"others:\n  - {name: b, command: [./bin]}\n":                                                   {"others[0].command: a controller binary runs in real time"},
	} {
		_, err := scenarios.Parse("s.yaml", []byte(head+doc))
		require.Error(t, err, doc)
		for _, w := range want {
			assert.Contains(t, err.Error(), w, doc)
		}
	}
	s := loadPair(t)
	require.Len(t, s.Others, 1)
	assert.Len(t, s.Others[0].RBAC, 2, "the RBAC file is read as the scenario is, one manifest per document")
	assert.Equal(t, "testdata/others/rbac.yaml", relSource(t, s.Others[0].RBAC[0].Source))
}

func relSource(t *testing.T, source string) string {
	t.Helper()
	i := len(source) - len("testdata/others/rbac.yaml")
	require.GreaterOrEqual(t, i, 0, source)
	return source[i:]
}

// What a run cannot do with the controllers it was given is a result with
// its error, before any backend starts.
func TestOthersNeedTheirControllers(t *testing.T) {
	s := loadPair(t)
	for name, c := range map[string]struct {
		others map[string]scenarios.Controller
		want   string
	}{
		"missing":      {nil, `others[0] (other): no controller: set Options.Others["other"], or give it a command`},
		"unknown":      {map[string]scenarios.Controller{"other": labeler, "stray": labeler}, `Options.Others["stray"]: the scenario runs no other of that name`},
		"two identity": {map[string]scenarios.Controller{"other": scaler.Controller{}}, "scaler declares its own identity (Identified) and the scenario gives it a serviceAccount and rbac: keep one"},
	} {
		t.Run(name, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Controller: scaler.Controller{}, Others: c.others})
			assert.False(t, res.Pass)
			assert.Contains(t, res.Error, c.want)
		})
	}
	same := *s
	same.Others = []scenarios.ControllerSpec{{Name: "scaler"}}
	res := scenarios.Run(t.Context(), &same, scenarios.Options{Backend: fake.Kind{}, Controller: scaler.Controller{}, Others: map[string]scenarios.Controller{"scaler": labeler}})
	assert.Contains(t, res.Error, "named as the controller under test is")
}

// Both controllers run, each as its own identity on its own clients; the
// checks about the controller judge the scaler alone, and a controller
// that writes only its own label or its own objects is no write war, on
// any seed.
func TestCorrectPairsConverge(t *testing.T) {
	for _, other := range []deploymentSyncer{labeler, mirror} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed-%d", other.name, seed+1), func(t *testing.T) {
				t.Parallel()
				res := runPair(t, loadPair(t), other, seed+1)
				assert.True(t, res.Pass, "%v", res.Reasons)
				assert.Empty(t, findingsOf(res, scenarios.InvNoWriteWar))
				assert.Contains(t, res.Invariants, scenarios.InvNoWriteWar)
				assert.Equal(t, "scaler", res.Controller)

				byController := map[string]int{}
				writes := map[string]int{}
				for _, q := range res.History.Requests {
					byController[q.Controller]++
					if q.Controller == "other" && q.Code < 300 && (q.Verb == "patch" || q.Verb == "create") {
						writes[q.Verb+" "+q.Resource]++
						if q.Verb == "patch" && q.Resource == "deployments" {
							require.NotNil(t, q.Body)
							assert.JSONEq(t, `{"metadata":{"labels":{"labeler.example/seen":"yes"}}}`, string(q.Body.Patch), "the history holds what it sent")
						}
					}
					assert.NotEqual(t, 403, q.Code, "every request is allowed by its own controller's RBAC: %v", q)
				}
				assert.Positive(t, byController[""], "the scaler made requests")
				assert.Positive(t, byController["other"], "the other controller made requests")
				if other.name == "labeler" {
					assert.GreaterOrEqual(t, writes["patch deployments"], 2, "the labeler labels each Deployment (again, when its cache lags)")
				} else {
					assert.Equal(t, 2, writes["create configmaps"], "the mirror creates a ConfigMap per Deployment")
					assert.Positive(t, writes["patch configmaps"], "and follows their replicas")
				}
				lives := map[string]int{}
				for _, l := range res.History.Lives {
					lives[l.Controller]++
				}
				assert.Equal(t, map[string]int{"": 1, "other": 1}, lives)
				assert.Equal(t, 1, res.Counters.Instances, "the counters are the scaler's")
				assert.Equal(t, byController[""], sum(res.Counters.RequestsByVerb), "the counters are the scaler's requests")
			})
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// RBAC is each controller's own: the other controller without the right to
// patch Deployments is refused, as its own service account, and the
// scaler beside it is not.
func TestEachControllerRunsAsItsOwnIdentity(t *testing.T) {
	s := loadPair(t)
	s.Others[0].RBAC = slices.Clone(s.Others[0].RBAC)
	role := s.Others[0].RBAC[0].Manifest
	require.Equal(t, "Role", role["kind"])
	s.Others[0].RBAC[0].Manifest = scenarios.Object{"apiVersion": role["apiVersion"], "kind": "Role", "metadata": role["metadata"],
		"rules": []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": []any{"get", "list", "watch"}}}}
	res := runPair(t, s, labeler, 1)

	forbidden := findingsOf(res, scenarios.InvNoForbidden)
	require.Len(t, forbidden, 1, "%v", res.Reasons)
	assert.Contains(t, forbidden[0].Detail, "the controller other's patch deployments/web-")
	assert.Contains(t, forbidden[0].Detail, "system:serviceaccount:converge:other-controller")
	refused, scalerWrites := 0, 0
	for _, q := range res.History.Requests {
		if q.Code == 403 {
			refused++
			assert.Equal(t, "other", q.Controller, "only the other controller lacks a right: %v", q)
		}
		if q.Controller == "" && q.Verb == "patch" && q.Resource == "deployments" && q.Code == 200 {
			scalerWrites++
		}
	}
	assert.Positive(t, refused)
	assert.Positive(t, scalerWrites, "the scaler patches Deployments as its own identity")
}

// A fault that names a controller fires in its clients only; one that
// names none, in the scaler's.
func TestAFaultTargetsOneController(t *testing.T) {
	s := loadPair(t)
	patches := chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}
	s.Faults = []chaos.Spec{
		{Fault: chaos.FaultConflict, Target: patches, When: chaos.When{Count: 2}, Controller: "other"},
		{Fault: chaos.FaultConflict, Target: patches, When: chaos.When{Count: 1}},
	}
	res := runPair(t, s, labeler, 1)
	assert.True(t, res.Pass, "%v", res.Reasons)
	assert.Empty(t, res.Unfired)

	fired := map[string]int{}
	for _, f := range res.History.Faults {
		fired[f.Controller]++
	}
	assert.Equal(t, map[string]int{"other": 2, "": 1}, fired)
	conflicts := map[string]int{}
	for _, q := range res.History.Requests {
		if q.Code == 409 {
			conflicts[q.Controller]++
		}
	}
	// The scaler's patches may also meet a real conflict (the labeler's
	// write in between); the labeler's, without a resourceVersion, only
	// an injected one.
	assert.Equal(t, 2, conflicts["other"], "the other controller's 409s are its fault's")
	assert.GreaterOrEqual(t, conflicts[""], 1, "the scaler's fault answered it")
	for _, f := range res.History.Faults {
		assert.True(t, slices.ContainsFunc(res.History.Requests, func(q reports.Request) bool {
			return q.Controller == f.Controller && q.Code == 409 && q.At.Equal(f.At) && strings.HasPrefix(f.Request, q.Verb+" "+q.Resource+" "+q.Namespace+"/"+q.Name)
		}), "firing %+v answered a request of the controller it names", f)
	}
	labelled := 0
	for _, q := range res.History.Requests {
		if q.Controller == "other" && q.Verb == "patch" && q.Code == 200 {
			labelled++
		}
	}
	assert.GreaterOrEqual(t, labelled, 2, "the other controller retried its conflicts (and labels again when its cache lags)")

	// The result holds who did what: saved and read back, it is judged
	// again to the same verdict, each firing matched to its fault by
	// controller too.
	data, err := json.Marshal(res)
	require.NoError(t, err)
	var saved reports.Result
	require.NoError(t, json.Unmarshal(data, &saved))
	again, err := scenarios.Rejudge(&saved, nil)
	require.NoError(t, err)
	assert.True(t, again.Pass, "%v", again.Reasons)
	assert.Empty(t, again.Unfired)
	marks := func(fs []chaos.Firing) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Controller)
		}
		return out
	}
	assert.Equal(t, marks(res.History.Faults), marks(again.History.Faults))
}

// The mutant holds the scaler's Deployments at 2 replicas while the scaler
// scales them up: a write war, caught on every seed.
func TestWriteWarIsCaught(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed-%d", seed+1), func(t *testing.T) {
			t.Parallel()
			res := runPair(t, loadPair(t), fighter, seed+1)
			assert.False(t, res.Pass)
			wars := findingsOf(res, scenarios.InvNoWriteWar)
			require.Len(t, wars, 1, "%v", res.Reasons)
			f := wars[0]
			assert.Equal(t, "deployments", f.Subject.Resource)
			assert.Contains(t, f.Detail, "the controller under test and controller other undo each other's spec.replicas of deployments/web-")
			require.NotNil(t, f.Request)
			assert.Contains(t, res.History.Requests, *f.Request, "the finding names the write that made the war")
			assert.Empty(t, findingsOf(res, scenarios.InvWritesAllowed))

			again, err := scenarios.Rejudge(res, nil)
			require.NoError(t, err)
			assert.Equal(t, wars, findingsOf(again, scenarios.InvNoWriteWar), "judged from the history alone")
		})
	}
}

// On a real API server the pair runs as on fake: each as its own service
// account, the fighter caught.
func TestWriteWarOnEnvtest(t *testing.T) {
	t.Parallel()
	simtest.Require(t)
	s := loadPair(t)
	s.Backends = []string{fake.Name, envtest.Name}
	// In real time: the fight starts with the scaler's first write, and
	// pods ready after 3 s end it.
	s.World.Readiness = scenarios.Readiness{Kind: "ready-after-delay", Delay: scenarios.Duration(3 * time.Second)}
	s.Timing = scenarios.Timing{Deadline: scenarios.Duration(20 * time.Second), Settle: scenarios.Duration(2 * time.Second)}
	kind, err := backends.Named(envtest.Name)
	require.NoError(t, err)
	res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: kind, Seed: 1, Controller: scaler.Controller{},
		Others: map[string]scenarios.Controller{"other": fighter}})
	require.Empty(t, res.Error)
	t.Logf("simulated %v, wall %v, converged %v: %v", res.Simulated, res.Wall, res.Converged, res.Reasons)
	assert.NotEmpty(t, findingsOf(res, scenarios.InvNoWriteWar), "%v", res.Reasons)
	for _, q := range res.History.Requests {
		assert.NotEqual(t, 403, q.Code, "%v", q)
	}
}

// A crash that names a controller ends an instance of that controller,
// which is replaced as its own spec says; the controller under test's
// instance lives on.
func TestACrashTargetsOneController(t *testing.T) {
	s := loadPair(t)
	s.Faults = []chaos.Spec{{Fault: chaos.FaultCrash, Controller: "other",
		Target: chaos.Target{Resource: "deployments", Verbs: []string{"patch"}}, When: chaos.When{Count: 1}}}
	res := runPair(t, s, labeler, 1)
	assert.True(t, res.Pass, "%v", res.Reasons)
	require.Len(t, res.History.Faults, 1)
	assert.Equal(t, "other", res.History.Faults[0].Controller)
	ended := map[string][]bool{}
	for _, l := range res.History.Lives {
		ended[l.Controller] = append(ended[l.Controller], !l.Ended.IsZero())
	}
	assert.Equal(t, map[string][]bool{"": {false}, "other": {true, false}}, ended, "the other controller's instance crashed and was replaced")
}

// scenariotest runs a scenario's others with the Go values its options
// give: a run without them would end as the harness's error and fail.
func TestScenariotestRunsTheOthers(t *testing.T) {
	s := loadPair(t)
	s.Backends = []string{fake.Name}
	scenariotest.RunScenarios(t, []*scenarios.Scenario{s}, func(*scenarios.Scenario) scenarios.Controller { return scaler.Controller{} },
		scenariotest.Options{Others: map[string]scenarios.Controller{"other": labeler}})
}

// The controller under test may take its identity from the file too, when
// its Go value declares none: applied and enforced as a declared one is.
func TestTheControllerUnderTestMayTakeItsIdentityFromTheFile(t *testing.T) {
	for name, verbs := range map[string][]any{"granted": {"get", "list", "watch", "patch"}, "refused": {"get", "list", "watch"}} {
		t.Run(name, func(t *testing.T) {
			s := loadPair(t)
			role := s.Others[0].RBAC[0].Manifest
			s.Controller = scenarios.ControllerSpec{ServiceAccount: "other-controller", RBAC: []scenarios.Objects{
				{Manifest: scenarios.Object{"apiVersion": role["apiVersion"], "kind": "Role", "metadata": role["metadata"],
					"rules": []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": verbs}}}},
				s.Others[0].RBAC[1]}}
			s.Others = nil
			var res *reports.Result
			synctest.Test(t, func(t *testing.T) {
				res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: labeler})
			})
			require.Empty(t, res.Error)
			assert.NotContains(t, strings.Join(res.Notes, "\n"), "full rights")
			forbidden := findingsOf(res, scenarios.InvNoForbidden)
			if name == "granted" {
				assert.True(t, res.Pass, "%v", res.Reasons)
				assert.Empty(t, forbidden)
				return
			}
			require.Len(t, forbidden, 1, "%v", res.Reasons)
			assert.Contains(t, forbidden[0].Detail, "the controller's patch deployments/web-")
			assert.Contains(t, forbidden[0].Detail, "system:serviceaccount:converge:other-controller")
		})
	}
}

// Exploration runs the scenario's other controllers in every run: the
// fighter's war is found (its references fail already).
func TestExploreRunsTheOthers(t *testing.T) {
	s := explore.WithoutFaults(loadPair(t))
	war := scenariotest.Explore(t, s, scaler.Controller{}, scenariotest.ExploreOptions{Seed: 1,
		Others: map[string]scenarios.Controller{"other": fighter}})
	require.NotNil(t, war)
	require.NotEmpty(t, war.Findings)
	assert.True(t, slices.ContainsFunc(war.Findings, func(f explore.Finding) bool { return f.Field == scenarios.InvNoWriteWar }), "%s", war.Text())
}

// A pair that shares the Deployments without a fight gives no finding at
// any point of its exploration: without the labeler in the points, their
// runs would lack its labels and differ from the references.
func TestExploreWithAPeacefulOtherFindsNothing(t *testing.T) {
	tier.Full(t, "every point of an exploration of the scaler and a labeler (about 2 min under the race detector)")
	s := explore.WithoutFaults(loadPair(t))
	peace := scenariotest.Explore(t, s, scaler.Controller{}, scenariotest.ExploreOptions{Seed: 1,
		Others: map[string]scenarios.Controller{"other": labeler}})
	require.NotNil(t, peace)
	assert.Empty(t, peace.Findings, "%s", peace.Text())
	assert.NotZero(t, peace.Coverage.Run, "points ran")
}
