package chaos_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/chaos"
)

const stream = `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}}
{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"6"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}
`

func TestDecodeFrames(t *testing.T) {
	frames, err := chaos.DecodeFrames([]byte(stream))
	require.NoError(t, err)
	require.Len(t, frames, 3)
	assert.Equal(t, []string{"ADDED", "DELETED", "ERROR"}, []string{frames[0].Type, frames[1].Type, frames[2].Type})

	for _, bad := range []string{`{"type":"ADDED"}`, `{"object":{}}`, `[1,2]`, `{"type":"ADDED","object":"x"}`, `{"type":`} {
		_, err := chaos.DecodeFrames([]byte(bad))
		assert.ErrorIs(t, err, chaos.ErrBadFrame, bad)
	}
}

// FuzzDecodeFrames: any input decodes or fails with ErrBadFrame, never
// panics, and whatever decodes re-encodes to frames that decode the same.
func FuzzDecodeFrames(f *testing.F) {
	f.Add([]byte(stream))
	f.Add([]byte(`{"type":"MODIFIED","object":{"metadata":{}}}{"type":"BOOKMARK","object":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := chaos.DecodeFrames(data)
		if err != nil {
			require.ErrorIs(t, err, chaos.ErrBadFrame)
		}
		var buf bytes.Buffer
		for _, fr := range frames {
			b, err := json.Marshal(fr)
			require.NoError(t, err)
			buf.Write(b)
			buf.WriteByte('\n')
		}
		again, err := chaos.DecodeFrames(buf.Bytes())
		require.NoError(t, err)
		require.Len(t, again, len(frames))
		for i := range frames {
			assert.Equal(t, frames[i].Type, again[i].Type)
			assert.JSONEq(t, string(frames[i].Object), string(again[i].Object))
		}
	})
}
