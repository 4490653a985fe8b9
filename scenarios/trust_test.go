package scenarios_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
)

// An invariant or write rule that could not fail in a run is reported as
// a fault that never fired is: a typo in a field's name, a selector that
// matches nothing, a rule for writes that were not made. The run still
// passes; the test that ran it fails on Unfired.
func TestVacuousChecksAreReported(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	deployments := scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}
	run := func(t *testing.T, s *scenarios.Scenario) []string {
		t.Helper()
		var unfired []string
		synctest.Test(t, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(s)})
			require.Empty(t, res.Error)
			assert.True(t, res.Pass, "%v", res.Reasons)
			unfired = res.Unfired
		})
		return unfired
	}

	s := *base
	s.Invariants = append(s.Invariants,
		// A typo in a key of a map (annotations): no schema can refuse it.
		scenarios.Invariant{Name: "typo", Select: deployments, Rule: "object.metadata.annotations['converge.dev/max-replica'] != ''"},
		scenarios.Invariant{Name: "nothing-selected", Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment", Labels: "app=nowhere"}, Rule: "true"},
		scenarios.Invariant{Name: "sound", Select: deployments, Rule: "object.spec.replicas >= 0"},
	)
	require.Empty(t, s.Writes)
	s.Writes = []scenarios.WriteRule{{Select: deployments}, {Select: scenarios.Selector{APIVersion: "v1", Kind: "ConfigMap"}}}
	unfired := run(t, &s)
	assert.Contains(t, unfired, "invariant typo (never true or false: each Deployment it selected lacked a field its rule reads)")
	assert.Contains(t, unfired, "invariant nothing-selected (selected no Deployment)")
	assert.Contains(t, unfired, "write rule 1 (selected no write of a ConfigMap)")
	for _, u := range unfired {
		assert.NotContains(t, u, "sound", "an invariant that was judged is not vacuous")
	}

	// Said to be allowed, they are not reported.
	for i := range s.Invariants {
		s.Invariants[i].MayBeVacuous = true
	}
	for i := range s.Writes {
		s.Writes[i].MayBeVacuous = true
	}
	assert.Empty(t, run(t, &s))
}

// A rule found false says what it read, so the user sees why.
func TestAFalseRuleSaysWhatItRead(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s := *base
	s.Invariants = append(s.Invariants, scenarios.Invariant{Name: "never-scaled", Select: scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"},
		Rule: "object.spec.replicas <= 1 || object.metadata.name == 'none'"})
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		require.False(t, res.Pass)
		i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == "never-scaled" })
		require.GreaterOrEqual(t, i, 0, "%v", res.Reasons)
		assert.Regexp(t, `is false \(it read object\.spec\.replicas = [0-9]+, object\.metadata\.name = "web-[0-9]+"\)$`, res.Findings[i].Detail)
	})
}

// creator creates ConfigMaps without end, a tenth of a second apart: the
// clock moves, so only the count of what it created can tell.
type creator struct{}

func (creator) Name() string { return "creator" }
func (creator) New(in scenarios.Instance) (scenarios.Runner, error) {
	return runnerFunc(func(ctx context.Context) error {
		for ctx.Err() == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "more-"}}
			_, _ = in.Client.CoreV1().ConfigMaps(in.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	}), nil
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// A controller that creates without end is a hot loop, and its run ends
// there rather than at its deadline.
func TestCreatingWithoutEndIsAHotLoop(t *testing.T) {
	s, err := scenarios.Parse("creates.yaml", []byte(`
name: creates
catches: a controller that creates without end
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, name: a}
      count: 1
timing: {deadline: 1h, settle: 50m}
`))
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: creator{}})
		require.Empty(t, res.Error)
		require.False(t, res.Pass)
		i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == "no-hot-loop" })
		require.GreaterOrEqual(t, i, 0, "%v", res.Reasons)
		assert.Equal(t, "2000 objects created: the controller creates without end", res.Findings[i].Detail)
		assert.Less(t, time.Duration(res.Simulated), 10*time.Minute, "the run ended at the hot loop")
	})
}

// A goal condition reads the other objects as an invariant does; one that
// reads oldObject, or a kind the scenario does not watch, is refused.
func TestGoalConditionReadsObjects(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s := *base
	s.Goal.Objects = append(slices.Clone(s.Goal.Objects), scenarios.Expectation{
		Select:    scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-0"},
		Condition: "objects.Deployment.all(d, d.spec.replicas >= 1) && size(objects.Deployment) > 1",
	})
	require.NoError(t, s.Validate())
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		assert.True(t, res.Pass, "%v", res.Reasons)
	})

	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "objects.Deployment.size() == 0"
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		assert.False(t, res.Pass, "a condition on the other objects that never holds fails the goal")
	})

	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "object.spec.replicas >= oldObject.spec.replicas"
	assert.ErrorContains(t, s.Validate(), "not oldObject")
	s.Goal.Objects[len(s.Goal.Objects)-1].Condition = "size(objects.Widget) == 0"
	assert.ErrorContains(t, s.Validate(), "objects.Widget: the scenario names no kind Widget")
}

// Interference sets any JSON value, or removes a field; a write the API
// server refuses ends the run as the harness's error, naming the step and
// the answer, never as a verdict on the controller.
func TestInterferenceSetsAnyValue(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	deployments := scenarios.Selector{APIVersion: "apps/v1", Kind: "Deployment"}
	run := func(t *testing.T, in scenarios.Interference) *reports.Result {
		s := *base
		s.World.Interference = []scenarios.Interference{in}
		require.NoError(t, s.Validate())
		var res *reports.Result
		synctest.Test(t, func(t *testing.T) {
			res = scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		})
		return res
	}
	logged := func(res *reports.Result, what string) bool {
		return slices.ContainsFunc(res.History.Log, func(e reports.Entry) bool { return strings.Contains(e.What, what) })
	}

	res := run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "spec.minReadySeconds", Value: 7}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: set spec.minReadySeconds of Deployment web-0"), "%v", res.History.Log)

	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "metadata.annotations", Remove: true}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: remove metadata.annotations of Deployment web-0"), "%v", res.History.Log)

	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Set: &scenarios.SetField{Path: "spec.replicas", Value: "many"}})
	require.False(t, res.Pass)
	assert.Contains(t, res.Error, "interference 0 could not set spec.replicas of Deployment web-0: the API server answered:")
	for _, f := range res.Findings {
		assert.Equal(t, reports.KindHarness, f.Kind, "no verdict on the controller: %+v", f)
	}

	s := *base
	s.World.Interference = []scenarios.Interference{{Every: scenarios.Duration(time.Second), Select: deployments, Set: &scenarios.SetField{Path: "spec.replicas"}}}
	assert.ErrorContains(t, s.Validate(), "give a value, or remove: true")

	// A write meant to be refused: its refusal is logged, and the run goes
	// on; the server taking it is the harness's error.
	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments, Refused: true,
		Set: &scenarios.SetField{Path: "spec.replicas", Value: "many"}})
	require.Empty(t, res.Error)
	assert.True(t, res.Pass, "%v", res.Reasons)
	assert.True(t, logged(res, "interference 0: set spec.replicas of Deployment web-0 refused, as it must be"), "%v", res.History.Log)
	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments, Refused: true,
		Patch: &scenarios.PatchStep{Type: scenarios.JSONPatch, Patch: []any{map[string]any{"op": "add", "path": "/spec/minReadySeconds", "value": 7}}}})
	require.False(t, res.Pass)
	assert.Contains(t, res.Error, "interference 0: the API server took the json patch of Deployment web-0, a write it must refuse")
	s.World.Interference = []scenarios.Interference{{Every: scenarios.Duration(time.Second), Select: deployments, Delete: true, Refused: true}}
	assert.ErrorContains(t, s.Validate(), "only a set or a patch can be refused")

	// Patches: merge (the default) and json, on the object or a
	// subresource, with {{n}} and {{now}} in their strings.
	labelled := func(res *reports.Result, key, value string) bool {
		return slices.ContainsFunc(res.History.Events, func(e reports.WatchEvent) bool {
			labels, _, _ := unstructured.NestedStringMap(e.Object, "metadata", "labels")
			return e.Object["kind"] == "Deployment" && labels[key] == value
		})
	}
	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 2, Select: deployments,
		Patch: &scenarios.PatchStep{Patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"touched": "n{{n}}"}}}}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: merge patch of Deployment web-0"), "%v", res.History.Log)
	assert.True(t, labelled(res, "touched", "n1"), "the second patch's label")
	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Patch: &scenarios.PatchStep{Type: scenarios.JSONPatch, Patch: []any{map[string]any{"op": "add", "path": "/metadata/labels/json", "value": "yes"}}}})
	require.Empty(t, res.Error)
	assert.True(t, logged(res, "interference 0: json patch of Deployment web-0"), "%v", res.History.Log)
	assert.True(t, labelled(res, "json", "yes"))
	res = run(t, scenarios.Interference{Every: scenarios.Duration(time.Second), Count: 1, Select: deployments,
		Patch: &scenarios.PatchStep{Subresource: "status", Patch: map[string]any{"status": map[string]any{"replicas": "many"}}}})
	require.False(t, res.Pass)
	assert.Contains(t, res.Error, "interference 0 could not merge patch of status of Deployment web-0: the API server answered:")

	for _, tc := range []struct {
		patch scenarios.PatchStep
		want  string
	}{
		{scenarios.PatchStep{Patch: []any{"x"}}, "a merge patch is an object"},
		{scenarios.PatchStep{Type: "strategic", Patch: map[string]any{}}, `type "strategic": merge or json`},
		{scenarios.PatchStep{Type: scenarios.JSONPatch, Patch: []any{map[string]any{"op": "frob", "path": "/a"}}}, "patch[0].op: one of add, remove"},
		{scenarios.PatchStep{Type: scenarios.JSONPatch, Patch: []any{map[string]any{"op": "add", "path": "a"}}}, "patch[0].path: a JSON pointer"},
		{scenarios.PatchStep{Subresource: "../x", Patch: map[string]any{}}, `subresource "../x"`},
		{scenarios.PatchStep{Patch: map[string]any{"a": "{{now+1y}}"}}, "a: {{now+1y}}: the offset must be a duration"},
	} {
		s.World.Interference = []scenarios.Interference{{Every: scenarios.Duration(time.Second), Select: deployments, Patch: &tc.patch}}
		assert.ErrorContains(t, s.Validate(), "world.interference[0].patch: "+tc.want)
	}
	s.World.Interference = []scenarios.Interference{{Every: scenarios.Duration(time.Second), Select: deployments, Delete: true,
		Patch: &scenarios.PatchStep{Patch: map[string]any{}}}}
	assert.ErrorContains(t, s.Validate(), "set, patch, delete or create, one of them")
}

// An interfering actor creates an object of its own once its name is free
// ("count" bounds what it made, not its tries), from "after" on.
func TestInterferenceCreatesOnceTheNameIsFree(t *testing.T) {
	base, err := scaler.Lookup("baseline")
	require.NoError(t, err)
	s := *base
	configMap := func(label string) scenarios.Object {
		return scenarios.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "taken", "labels": map[string]any{"by": label}}}
	}
	s.Objects = append(slices.Clone(s.Objects), scenarios.Objects{Manifest: configMap("first")})
	s.World.Interference = []scenarios.Interference{
		// "taken" exists from the start: it is deleted at 3 s, and made
		// again by the second actor, which waits for the name from 2 s on.
		{Every: scenarios.Duration(3 * time.Second), Count: 1, Select: scenarios.Selector{APIVersion: "v1", Kind: "ConfigMap", Name: "taken"}, Delete: true},
		{After: scenarios.Duration(2 * time.Second), Every: scenarios.Duration(500 * time.Millisecond), Count: 1, Create: configMap("actor-{{n}}")},
		// A name free from the start: made at its first tick after 5 s.
		{After: scenarios.Duration(5 * time.Second), Every: scenarios.Duration(time.Second), Count: 1,
			Create: scenarios.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "late"}}},
	}
	require.NoError(t, s.Validate())
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), &s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: scaler.For(&s)})
		require.Empty(t, res.Error)
		var created []reports.Entry
		for _, e := range res.History.Log {
			if strings.HasPrefix(e.What, "interference 1 created") {
				created = append(created, e)
			}
		}
		require.Len(t, created, 1, "one object made: %v", res.History.Log)
		assert.Equal(t, "interference 1 created ConfigMap taken", created[0].What)
		d := slices.IndexFunc(res.History.Log, func(e reports.Entry) bool { return e.What == "interference 0 deleted ConfigMap taken" })
		require.GreaterOrEqual(t, d, 0, "%v", res.History.Log)
		freed := res.History.Log[d].At
		assert.Equal(t, 3*time.Second, freed.Sub(res.History.Start).Round(100*time.Millisecond), "every 3s from the start, however long the setup took")
		// The delete and a tick of the creator fall on one instant (3 s):
		// which goes first is goroutine order, so the create comes at that
		// tick or the next one, never before the delete nor a period after.
		assert.False(t, created[0].At.Before(freed), "created at %v, while the name was taken until %v", created[0].At, freed)
		assert.LessOrEqual(t, created[0].At.Sub(freed), 500*time.Millisecond, "the first tick at or after the name came free")
		i := slices.IndexFunc(res.History.Log, func(e reports.Entry) bool { return e.What == "interference 2 created ConfigMap late" })
		require.GreaterOrEqual(t, i, 0, "%v", res.History.Log)
		assert.Equal(t, 6*time.Second, res.History.Log[i].At.Sub(res.History.Start).Round(100*time.Millisecond), "after 5s, every 1s")
		uids := map[string]string{}
		for _, e := range res.History.Events {
			if e.Name == "taken" && e.Type == "ADDED" {
				uid, _, _ := unstructured.NestedString(e.Object, "metadata", "uid")
				by, _, _ := unstructured.NestedString(e.Object, "metadata", "labels", "by")
				uids[uid] = by
			}
		}
		assert.ElementsMatch(t, []string{"first", "actor-0"}, slices.Collect(maps.Values(uids)), "the first, then the actor's own ({{n}} counts what it made)")
	})

	for _, tc := range []struct {
		in   scenarios.Interference
		want string
	}{
		{scenarios.Interference{Every: scenarios.Duration(time.Second), Create: scenarios.Object{"kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}},
			"world.interference[0].create: apiVersion and kind are required"},
		{scenarios.Interference{Every: scenarios.Duration(time.Second), Create: scenarios.Object{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"generateName": "x-"}}}, "a name, with {{n}} where each action makes another"},
		{scenarios.Interference{Every: scenarios.Duration(time.Second), Create: scenarios.Object{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "Not_A_Name{{n}}"}}}, `metadata.name "Not_A_Name0"`},
		{scenarios.Interference{Every: scenarios.Duration(time.Second), After: scenarios.Duration(-time.Second), Delete: true,
			Select: scenarios.Selector{APIVersion: "v1", Kind: "ConfigMap"}}, "world.interference[0].after: within"},
	} {
		s.World.Interference = []scenarios.Interference{tc.in}
		assert.ErrorContains(t, s.Validate(), tc.want)
	}
}

// labeller labels every ConfigMap seen=yes, through an informer, the way
// its options say: on the typed client or one built on the config, on a
// copy or on the cached object itself, with or without the harness's
// cache transform and a transform of its own that strips managed fields
// in place (as many controllers do).
type labeller struct {
	inPlace, viaConfig, tracked bool
}

func (labeller) Name() string { return "labeller" }

func (l labeller) New(in scenarios.Instance) (scenarios.Runner, error) {
	client := in.Client
	if l.viaConfig {
		var err error
		if client, err = kubernetes.NewForConfig(in.Config); err != nil {
			return nil, err
		}
	}
	strip := func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	transform := cache.TransformFunc(strip)
	if l.tracked {
		transform = func(obj any) (any, error) {
			obj, _ = strip(obj)
			return in.CacheTransform(obj)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(in.Namespace), informers.WithTransform(transform))
	cms := factory.Core().V1().ConfigMaps()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return nil, err
	}
	sync := func(ctx context.Context, key string) error {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		cm, err := cms.Lister().ConfigMaps(ns).Get(name)
		if err != nil || cm.Labels["seen"] == "yes" {
			return nil
		}
		if !l.inPlace {
			cm = cm.DeepCopy()
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["seen"] = "yes"
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
	return runnerFunc(func(ctx context.Context) error {
		defer queue.ShutDown()
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), cms.Informer().HasSynced) {
			return nil
		}
		go func() {
			<-ctx.Done()
			queue.ShutDown()
		}()
		for {
			key, quit := queue.Get()
			if quit {
				return nil
			}
			if err := sync(ctx, key); err != nil {
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	}), nil
}

// A controller that modifies what its informer's cache holds is a
// finding that names the object and the fields, seen on the typed client
// of the fake backend and through the cache transform on the config; the
// same controller working on a copy, with a transform of its own that
// strips fields in place, is not.
func TestCacheMutationIsAFinding(t *testing.T) {
	s, err := scenarios.Parse("labels.yaml", []byte(`
name: labels
catches: a controller that labels what its cache holds
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
world:
  # Taking the label off again brings each ConfigMap back by a watch
  # event, after the LIST that brought it first.
  interference:
    - every: 5s
      count: 3
      select: {apiVersion: v1, kind: ConfigMap}
      set: {path: metadata.labels.seen, remove: true}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, labels: seen=yes}
      count: 3
timing: {deadline: 1m, settle: 5s}
`))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		c      labeller
		caught bool
	}{
		{"typed client, on a copy", labeller{}, false},
		{"typed client, tracked, on a copy", labeller{tracked: true}, false},
		{"config, tracked, on a copy", labeller{viaConfig: true, tracked: true}, false},
		{"typed client, in place", labeller{inPlace: true}, true},
		{"config, tracked, in place", labeller{inPlace: true, viaConfig: true, tracked: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				synctest.Test(t, func(t *testing.T) {
					res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: seed, Controller: tc.c})
					require.Empty(t, res.Error)
					i := slices.IndexFunc(res.Findings, func(f reports.Finding) bool { return f.Check == scenarios.InvNoCacheMutation })
					if !tc.caught {
						assert.True(t, res.Pass, "seed %d: %v", seed, res.Reasons)
						assert.Less(t, i, 0, "seed %d", seed)
						return
					}
					require.GreaterOrEqual(t, i, 0, "seed %d: %v", seed, res.Reasons)
					f := res.Findings[i]
					assert.Equal(t, "ConfigMap", f.Subject.Kind)
					assert.Contains(t, f.Detail, `metadata.labels.seen set to yes`)
					assert.Contains(t, f.Detail, "Seen as it sent update configmaps "+f.Subject.Name)
					assert.False(t, res.Pass)
				})
			}
		})
	}
}

// A fault profile's fault that matches no request of the controller says
// the profile does not apply to it (Result.Inapplicable), not that the
// run proves nothing (Result.Unfired): the labeller under the conflicts
// profile, with nothing left to label, never updates.
func TestProfileFaultsThatMatchNothingAreInapplicable(t *testing.T) {
	profiles, err := scenarios.FaultProfiles()
	require.NoError(t, err)
	i := slices.IndexFunc(profiles, func(p *scenarios.Scenario) bool { return p.Name == "conflicts" })
	require.GreaterOrEqual(t, i, 0)
	for _, tc := range []struct {
		label        string
		inapplicable bool
	}{{"yes", true}, {"no", false}} {
		t.Run("seen="+tc.label, func(t *testing.T) {
			s, err := scenarios.Parse("labels.yaml", []byte(`
name: labels
catches: a ConfigMap left unlabelled
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {seen: "`+tc.label+`"}}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, labels: seen=yes}
      count: 1
timing: {deadline: 1m, settle: 5s}
`))
			require.NoError(t, err)
			under, err := s.Under(profiles[i])
			require.NoError(t, err)
			synctest.Test(t, func(t *testing.T) {
				res := scenarios.Run(t.Context(), under, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: labeller{}})
				require.Empty(t, res.Error)
				assert.True(t, res.Pass, "%v", res.Reasons)
				assert.Empty(t, res.Unfired)
				if tc.inapplicable {
					assert.Equal(t, []string{"fault 0 (conflict)"}, res.Inapplicable)
				} else {
					assert.Empty(t, res.Inapplicable)
				}
			})
		})
	}
}

// "{{now+5s}}" in a manifest is five seconds after the run's start, in
// the API's own time format, on the fake backend's virtual clock too; an
// interference's "{{now}}" is the instant it writes; a malformed offset is
// refused at load.
func TestManifestsWriteTimesRelativeToTheRun(t *testing.T) {
	head := `
name: expiry
catches: a time written as from the run's start
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, annotations: {expires: "{{now+5s}}"}}}
`
	s, err := scenarios.Parse("expiry.yaml", []byte(head+`
world:
  interference:
    - every: 3s
      count: 1
      select: {apiVersion: v1, kind: ConfigMap}
      set: {path: data.touched, value: "at {{now}}"}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, name: a}
      condition: >
        timestamp(object.metadata.annotations['expires']) - timestamp(object.metadata.creationTimestamp) == duration('5s') &&
        object.data.touched == 'at ' + string(timestamp(object.metadata.creationTimestamp) + duration('3s'))
timing: {deadline: 1m, settle: 5s}
`))
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: labeller{}})
		require.Empty(t, res.Error)
		assert.True(t, res.Pass, "%v", res.Reasons)
	})
	_, err = scenarios.Parse("expiry.yaml", []byte(head+`
world:
  interference:
    - every: 3s
      select: {apiVersion: v1, kind: ConfigMap}
      set: {path: data.touched, value: "{{now+3 days}}"}
`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `world.interference[0].set.value: {{now+3 days}}: the offset must be a duration such as 5s or 1h30m`)
}
