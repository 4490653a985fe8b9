package duration_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/duration"
)

// A duration is written as a string and read back; a number, whose unit
// nothing says, is refused.
func TestOneEncoding(t *testing.T) {
	b, err := json.Marshal(duration.Duration(90 * time.Second))
	require.NoError(t, err)
	assert.JSONEq(t, `"1m30s"`, string(b))
	var d duration.Duration
	require.NoError(t, json.Unmarshal(b, &d))
	assert.Equal(t, duration.Duration(90*time.Second), d)
	for _, bad := range []string{`30`, `"30"`, `"thirty seconds"`, `{}`} {
		err := json.Unmarshal([]byte(bad), &d)
		assert.Error(t, err, bad)
	}
	assert.ErrorContains(t, json.Unmarshal([]byte(`30`), &d), `a string like "1m30s"`)
}
