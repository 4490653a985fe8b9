package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/reports"
)

func TestWriteRuleFields(t *testing.T) {
	for _, tt := range []struct {
		field, path string
		want        bool
	}{
		{"spec.replicas", "spec.replicas", true},
		{"spec", "spec.template.spec.containers", true},
		{"spec.replicas", "spec.replicasX", false},
		{`metadata.annotations["owner"]`, "metadata.annotations.owner", true},
		{`metadata.annotations["converge.dev/*"]`, `metadata.annotations["converge.dev/last-scale"]`, true},
		{`metadata.annotations["converge.dev/*"]`, `metadata.annotations["other.dev/x"]`, false},
		{"status", "status.conditions[0].type", true},
		{"*", "anything", true},
		{"status.*", "status.ready", true},
		{"status.*", "spec.x", false},
	} {
		assert.Equal(t, tt.want, allows(tt.field, tt.path), "%s allows %s", tt.field, tt.path)
	}
}

func TestChangedPaths(t *testing.T) {
	assert.ElementsMatch(t, []string{"spec.replicas", `metadata.annotations["converge.dev/x"]`},
		patchPaths(types.MergePatchType, []byte(`{"spec":{"replicas":3},"metadata":{"resourceVersion":"7","annotations":{"converge.dev/x":"y"}}}`)))
	assert.ElementsMatch(t, []string{"spec.replicas", `metadata.labels["a/b"]`},
		patchPaths(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":3},{"op":"add","path":"/metadata/labels/a~1b","value":"c"}]`)))

	old := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "1"}, "spec": map[string]any{"replicas": int64(2), "x": "same"},
		"status": map[string]any{"ready": int64(1)}}
	sent := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "1", "annotations": map[string]any{"owner": "t"}},
		"spec": map[string]any{"replicas": int64(3), "x": "same"}, "status": map[string]any{"ready": int64(5)}}
	assert.ElementsMatch(t, []string{"metadata.annotations.owner", "spec.replicas"}, diffPaths(old, sent, ""),
		"an update of the object leaves status alone; a map that appears is named by its keys")
	assert.ElementsMatch(t, []string{"status.ready"}, diffPaths(old, sent, "status"))
}

// A delete sent after the observer had seen the object's DELETED event (a
// kubelet finishing a graceful delete at once) is judged against the
// object as it last was, not against nothing: the rule that selects it by
// its labels allows it, and a rule selecting other labels does not.
func TestWriteRuleJudgesADeleteOfAnObjectSeenDeleted(t *testing.T) {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5", "labels": map[string]any{"app": "web"}}}
	h := &reports.History{Start: t0, Resources: map[string]string{"pods": "v1 Pod"},
		Events: []reports.WatchEvent{
			{At: t0, Type: "ADDED", Resource: "pods", Namespace: "ns", Name: "p", RV: "5", Kind: "v1 Pod", Object: pod},
			{At: t0.Add(time.Second), Type: "DELETED", Resource: "pods", Namespace: "ns", Name: "p", RV: "6", Kind: "v1 Pod", Object: pod},
		},
		Requests: []reports.Request{{At: t0.Add(2 * time.Second), Verb: "delete", Resource: "pods", Namespace: "ns", Name: "p", Code: 200, Seen: 2}},
	}
	for _, tt := range []struct {
		labels  string
		allowed bool
	}{{"app=web", true}, {"app=other", false}} {
		c, err := Compile(Rules{Writes: []WriteRule{{Select: Selector{APIVersion: "v1", Kind: "Pod", Labels: tt.labels}, Verbs: []string{"delete"}}}})
		require.NoError(t, err)
		var found []reports.Finding
		for _, f := range c.Judge(h, nil).Findings {
			if f.Check == WritesAllowed {
				found = append(found, f)
			}
		}
		if tt.allowed {
			assert.Empty(t, found, "a rule selecting %s", tt.labels)
		} else {
			assert.NotEmpty(t, found, "a rule selecting %s", tt.labels)
		}
	}
}

// A create cancelled in flight (its instance stopped as it sent it) got no
// answer, but the server carried it out: the Service is there, and no
// later write makes it again. A rule that selects it has a write to judge,
// so the rule is not vacuous, and a rule that does not allow it is broken.
// A create the server refused (409) is judged by neither.
func TestAWriteCancelledInFlightIsJudged(t *testing.T) {
	svc := map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "shop", "namespace": "ns", "labels": map[string]any{"app": "shop"}}}
	history := func(code int) *reports.History {
		return &reports.History{Start: t0, Resources: map[string]string{"services": "v1 Service"},
			Requests: []reports.Request{{At: t0.Add(time.Second), Verb: "create", Resource: "services", Namespace: "ns", Name: "shop",
				Code: code, Error: "context canceled", Body: &reports.Body{Object: svc}}},
		}
	}
	judge := func(h *reports.History, verbs []string) (vacuous, broken bool) {
		c, err := Compile(Rules{Writes: []WriteRule{{Select: Selector{APIVersion: "v1", Kind: "Service", Labels: "app=shop"}, Verbs: verbs}}})
		require.NoError(t, err)
		for _, f := range c.Judge(h, nil).Findings {
			vacuous = vacuous || f.Check == NoVacuousCheck
			broken = broken || f.Check == WritesAllowed
		}
		return vacuous, broken
	}
	vacuous, broken := judge(history(0), []string{"create"})
	assert.False(t, vacuous, "the cancelled create is a write the rule selects")
	assert.False(t, broken)
	_, broken = judge(history(0), []string{"update"})
	assert.True(t, broken, "a create no rule allows, cancelled or not")
	vacuous, broken = judge(history(409), []string{"update"})
	assert.True(t, vacuous, "a refused create is no write")
	assert.False(t, broken)
}
