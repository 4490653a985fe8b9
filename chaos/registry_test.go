package chaos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/converge-lab/converge/chaos"
)

func TestSpecBuildsEveryFault(t *testing.T) {
	params := map[string]chaos.Spec{
		"throttle":    {RetryAfter: 2},
		"latency":     {Delay: time.Second},
		"watch-delay": {Delay: time.Second},
	}
	for _, name := range chaos.Names() {
		s := params[name]
		s.Fault = name
		in, err := s.Build()
		require.NoError(t, err, name)
		assert.Equal(t, name, in.Fault.Name())
	}
	assert.Len(t, chaos.Names(), 19)
}

func TestSpecFromYAML(t *testing.T) {
	var s chaos.Spec
	require.NoError(t, yaml.UnmarshalStrict([]byte(`
fault: server-error
code: 503
retryAfter: 1
target: {verbs: [patch], resource: deployments, name: web-1}
when: {nth: 1, after: 10s, until: 1m}
`), &s))
	in, err := s.Build()
	require.NoError(t, err)
	assert.Equal(t, "server-error", in.Fault.Name())
	assert.Equal(t, chaos.When{Nth: 1, After: 10 * time.Second, Until: time.Minute}, in.When)
	assert.Equal(t, chaos.Target{Verbs: []string{"patch"}, Resource: "deployments", Name: "web-1"}, in.Fault.Target())
}

func TestBadSpecsAreClearErrors(t *testing.T) {
	for _, tt := range []struct {
		spec chaos.Spec
		msg  string
	}{
		{chaos.Spec{Fault: "meteor"}, `unknown fault "meteor" (known: [apiserver-restart compaction conflict crash`},
		{chaos.Spec{Fault: "throttle"}, "throttle: throttle needs retryAfter >= 1"},
		{chaos.Spec{Fault: "server-error", Code: 404}, "server-error code must be within 500..599, got 404"},
		{chaos.Spec{Fault: "latency"}, "latency needs a positive delay"},
		{chaos.Spec{Fault: "conflict", Target: chaos.Target{Verbs: []string{"pach"}}}, `unknown verb "pach"`},
		{chaos.Spec{Fault: "conflict", When: chaos.When{Probability: 2}}, "probability outside [0, 1]"},
		{chaos.Spec{Fault: "conflict", When: chaos.When{Every: time.Second}}, "every repeats only a scheduled control-plane fault"},
		{chaos.Spec{Fault: "compaction", Target: chaos.Target{Resource: "pods"}, When: chaos.When{Every: time.Second}}, "every repeats only a scheduled control-plane fault"},
	} {
		_, err := tt.spec.Build()
		require.Error(t, err, "%+v", tt.spec)
		assert.Contains(t, err.Error(), tt.msg)
	}
}

func TestSpecYAMLErrors(t *testing.T) {
	for doc, msg := range map[string]string{
		"fault: latency\ndelay: soon\n":         `time: invalid duration "soon"`,
		"fault: latency\ndelya: 2s\n":           `unknown field "delya"`,
		"fault: conflict\nwhen: {nht: 1}\n":     `unknown field "nht"`,
		"fault: conflict\nwhen: {after: [1]}\n": "a duration is a string",
	} {
		var s chaos.Spec
		err := yaml.Unmarshal([]byte(doc), &s)
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), msg, doc)
	}
	var s chaos.Spec
	require.NoError(t, yaml.Unmarshal([]byte("fault: watch-delay\ndelay: 1500ms\n"), &s))
	assert.Equal(t, 1500*time.Millisecond, s.Delay)
	require.NoError(t, yaml.Unmarshal([]byte("fault: compaction\nwhen: {after: 10s, every: 30s, count: 5}\n"), &s))
	assert.Equal(t, chaos.When{After: 10 * time.Second, Every: 30 * time.Second, Count: 5}, s.When)
}
