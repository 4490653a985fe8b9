package scenarios_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim/backends"
	"github.com/converge-lab/converge/sim/envtest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

// deleter reads the ConfigMap "victim" once, and deletes it by name
// 3 s later, with the UID it read as a precondition when guarded: the
// victim has been replaced meanwhile, and only the unguarded delete
// removes an object it never received.
type deleter struct {
	viaConfig, guarded bool
}

func (deleter) Name() string { return "deleter" }

func (d deleter) New(in scenarios.Instance) (scenarios.Runner, error) {
	client := in.Client
	if d.viaConfig {
		var err error
		if client, err = kubernetes.NewForConfig(in.Config); err != nil {
			return nil, err
		}
	}
	return runnerFunc(func(ctx context.Context) error {
		cms := client.CoreV1().ConfigMaps(in.Namespace)
		victim, err := cms.Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * time.Second):
		}
		var opts metav1.DeleteOptions
		if d.guarded {
			opts.Preconditions = &metav1.Preconditions{UID: &victim.UID}
		}
		if err := cms.Delete(ctx, "victim", opts); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
			return err
		}
		<-ctx.Done()
		return nil
	}), nil
}

func replacedVictim(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Parse("replaced.yaml", []byte(`
name: replaced
catches: a delete by name of an object replaced since it was read
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: victim, labels: {by: harness}}}
world:
  interference:
    - {every: 1s, count: 1, select: {apiVersion: v1, kind: ConfigMap, name: victim}, delete: true}
    - after: 1s
      every: 500ms
      count: 1
      create: {apiVersion: v1, kind: ConfigMap, metadata: {name: victim, labels: {by: someone-else}}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, labels: by=harness}
      count: 0
timing: {deadline: 30s, settle: 3s}
`))
	require.NoError(t, err)
	return s
}

// checkReceived asserts what a run of deleter recorded: the instance
// received the victim it read (and no other), the delete's answer named
// the replacement, and no-blind-delete judged it as the guard says.
func checkReceived(t *testing.T, res *reports.Result, d deleter) {
	t.Helper()
	require.Empty(t, res.Error)
	var read []string
	for _, rc := range res.History.Received {
		if rc.Name == "victim" && !rc.Deleted {
			read = append(read, rc.UID)
		}
	}
	require.Len(t, read, 1, "the instance received the victim it read, once: %+v", res.History.Received)
	i := slices.IndexFunc(res.History.Requests, func(q reports.Request) bool { return q.Verb == "delete" && q.Name == "victim" })
	require.GreaterOrEqual(t, i, 0)
	del := res.History.Requests[i]
	found := slices.ContainsFunc(res.Findings, func(f reports.Finding) bool { return f.Check == scenarios.InvNoBlindDelete })
	if d.guarded {
		assert.Equal(t, 409, del.Code, "the precondition spares the replacement")
		assert.False(t, found, "%v", res.Reasons)
		return
	}
	require.Equal(t, 200, del.Code)
	assert.NotEmpty(t, del.UID)
	assert.NotEqual(t, read[0], del.UID, "the answer names the replacement it removed")
	assert.True(t, found, "%v", res.Reasons)
}

// What an instance received is recorded on both doors of the fake backend
// (its typed client and its REST door), and no-blind-delete judges a
// delete against it: it fires on the delete that removed the replacement,
// and not on one a UID precondition guarded.
func TestNoBlindDeleteOnFake(t *testing.T) {
	s := replacedVictim(t)
	for _, d := range []deleter{{}, {guarded: true}, {viaConfig: true}, {viaConfig: true, guarded: true}} {
		synctest.Test(t, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: d})
			checkReceived(t, res, d)
		})
	}
}

func TestNoBlindDeleteOnEnvtest(t *testing.T) {
	t.Parallel()
	simtest.Require(t)
	s := replacedVictim(t)
	s.Backends = []string{fake.Name, envtest.Name}
	kind, err := backends.Named(envtest.Name)
	require.NoError(t, err)
	for _, d := range []deleter{{}, {guarded: true}} {
		res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: kind, Seed: 1, Controller: d})
		checkReceived(t, res, d)
	}
}

// regresser lists the ConfigMap "state" (data.v "0"), patches data.v to
// "1" a second later and, a second after that, back to "0", the value of
// the view it listed: it has received only its own write's answer since,
// so it writes from a view older than its own write. Guarded, the second
// patch carries the resourceVersion it listed and is refused.
type regresser struct {
	viaConfig, guarded bool
}

func (regresser) Name() string { return "regresser" }

func (r regresser) New(in scenarios.Instance) (scenarios.Runner, error) {
	client := in.Client
	if r.viaConfig {
		var err error
		if client, err = kubernetes.NewForConfig(in.Config); err != nil {
			return nil, err
		}
	}
	return runnerFunc(func(ctx context.Context) error {
		cms := client.CoreV1().ConfigMaps(in.Namespace)
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		rv := ""
		for _, cm := range list.Items {
			if cm.Name == "state" {
				rv = cm.ResourceVersion
			}
		}
		for _, v := range []string{"1", "0"} {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			patch := `{"data":{"v":"` + v + `"}}`
			if r.guarded && v == "0" {
				patch = `{"metadata":{"resourceVersion":"` + rv + `"},"data":{"v":"0"}}`
			}
			_, err := cms.Patch(ctx, "state", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	}), nil
}

func regressedState(t *testing.T) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Parse("regressed.yaml", []byte(`
name: regressed
catches: a write that sets a field back to the view the instance holds, over its own newer write
objects:
  - manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: state}, data: {v: "0"}}
goal:
  objects:
    - select: {apiVersion: v1, kind: ConfigMap, name: state}
      count: 1
timing: {deadline: 30s, settle: 4s}
`))
	require.NoError(t, err)
	return s
}

// checkRegressed asserts what a run of regresser was judged: the unguarded
// write back to "0" is no-stale-write's, with the versions it read; the
// guarded one was refused.
func checkRegressed(t *testing.T, res *reports.Result, r regresser) {
	t.Helper()
	require.Empty(t, res.Error)
	var found []reports.Finding
	for _, f := range res.Findings {
		if f.Check == scenarios.InvNoStaleWrite {
			found = append(found, f)
		}
	}
	if r.guarded {
		assert.Empty(t, found)
		return
	}
	require.Len(t, found, 1, "%v", res.Reasons)
	assert.Contains(t, found[0].Detail, `it set data.v back to "0"`)
	assert.Contains(t, found[0].Detail, `over "1", which its controller had set itself`)
}

// no-stale-write reads the resourceVersions of what an instance received on
// both doors of the fake backend.
func TestNoStaleWriteOnFake(t *testing.T) {
	s := regressedState(t)
	for _, r := range []regresser{{}, {guarded: true}, {viaConfig: true}, {viaConfig: true, guarded: true}} {
		synctest.Test(t, func(t *testing.T) {
			res := scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: r})
			checkRegressed(t, res, r)
		})
	}
}

func TestNoStaleWriteOnEnvtest(t *testing.T) {
	t.Parallel()
	simtest.Require(t)
	s := regressedState(t)
	s.Backends = []string{fake.Name, envtest.Name}
	kind, err := backends.Named(envtest.Name)
	require.NoError(t, err)
	for _, r := range []regresser{{}, {guarded: true}} {
		res := scenarios.Run(context.Background(), s, scenarios.Options{Backend: kind, Seed: 1, Controller: r})
		checkRegressed(t, res, r)
	}
}
