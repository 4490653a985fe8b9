package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame is one event of a JSON watch stream.
type Frame struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// object is the part of a frame's object the targets look at.
type object struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// ErrBadFrame is returned for a stream that is not JSON watch frames.
var ErrBadFrame = errors.New("not a JSON watch frame")

// frameReader decodes the concatenated JSON frames of a watch stream.
type frameReader struct{ dec *json.Decoder }

func newFrameReader(r io.Reader) *frameReader { return &frameReader{dec: json.NewDecoder(r)} }

// next returns the next frame, io.EOF at the end of the stream, or an error
// wrapping ErrBadFrame.
func (r *frameReader) next() (Frame, error) {
	var f Frame
	if err := r.dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if f.Type == "" || len(f.Object) == 0 || f.Object[0] != '{' {
		return Frame{}, fmt.Errorf("%w: missing type or object", ErrBadFrame)
	}
	return f, nil
}

// meta reads the frame object's name, namespace and resourceVersion.
func (f Frame) meta() (name, namespace, resourceVersion string) {
	var o object
	_ = json.Unmarshal(f.Object, &o)
	return o.Metadata.Name, o.Metadata.Namespace, o.Metadata.ResourceVersion
}

// encode writes the frame as the API server does: one JSON object and a
// newline.
func (f Frame) encode() ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeFrames decodes a whole watch stream; it is what the injector runs on
// every watch, exposed for tests and fuzzing.
func DecodeFrames(data []byte) ([]Frame, error) {
	r := newFrameReader(bytes.NewReader(data))
	var out []Frame
	for {
		f, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}
