package scenarios

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNowMarksAreTheInstantOfTheWrite(t *testing.T) {
	at := time.Date(2000, 1, 1, 0, 0, 0, 500, time.UTC)
	in := map[string]any{
		"a": "{{now}}",
		"b": []any{"expires {{ now + 5s }}", int64(3)},
		"c": map[string]any{"d": "{{now-1h30m}} and {{index}}"},
		"e": "{{now+5x}}",
	}
	got := withNow(in, at)
	assert.Equal(t, map[string]any{
		"a": "2000-01-01T00:00:00Z",
		"b": []any{"expires 2000-01-01T00:00:05Z", int64(3)},
		"c": map[string]any{"d": "1999-12-31T22:30:00Z and {{index}}"},
		"e": "{{now+5x}}",
	}, got)
	assert.Equal(t, "{{now}}", in["a"], "the scenario's own value is left as it is")
	assert.Equal(t, []string{`e: {{now+5x}}: the offset must be a duration such as 5s or 1h30m: time: unknown unit "x" in duration "5x"`},
		checkNow(in, ""))
	assert.Len(t, checkNow(map[string]any{"x": []any{"{{now+-5s}}", "{{now+1000000h}}"}}, ""), 2)
}
