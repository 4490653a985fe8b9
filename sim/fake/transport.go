package fake

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/client-go/rest"
)

// inProcess is an http.RoundTripper that calls a handler in the caller's
// process: no listener and no socket, so inside a testing/synctest bubble
// the clock keeps moving (a blocked socket read is not durably blocked; a
// channel or a pipe is).
//
// An ordinary request runs the handler in the caller's goroutine and
// answers from a buffer. A watch runs it in its own goroutine and answers
// as soon as the headers are written, its body a pipe the handler streams
// into; closing the body ends the handler's context.
type inProcess struct {
	h http.Handler
}

// host is the address in-process configs carry: never resolved.
const host = "http://fake.invalid"

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	if q := req.URL.Query().Get("watch"); q == "true" || q == "1" {
		return t.stream(req)
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return response(req, rec.code, rec.header, io.NopCloser(bytes.NewReader(rec.body.Bytes())), int64(rec.body.Len())), nil
}

func response(req *http.Request, code int, header http.Header, body io.ReadCloser, length int64) *http.Response {
	return &http.Response{
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: body, ContentLength: length, Request: req,
	}
}

// recorder is the ResponseWriter of an ordinary request.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// stream runs a watch: the response is returned once the handler has
// written its headers, and the body reads what it writes next.
func (t *inProcess) stream(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			sw.start(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(sw, req.WithContext(ctx))
	}()
	select {
	case <-sw.ready:
	case <-ctx.Done():
		cancel()
		_ = pr.Close()
		return nil, ctx.Err()
	}
	return response(req, sw.code, sw.sent, &streamBody{pr: pr, cancel: cancel}, -1), nil
}

// streamWriter is the ResponseWriter of a watch.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter

	once  sync.Once
	ready chan struct{}
	code  int
	sent  http.Header // the headers as they were when the response started
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) start(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *streamWriter) WriteHeader(code int) { w.start(code) }

func (w *streamWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(p)
}

// Flush: every write already reaches the reader.
func (w *streamWriter) Flush() { w.start(http.StatusOK) }

// streamBody ends the handler when the client closes the body.
type streamBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *streamBody) Close() error {
	b.cancel()
	return b.pr.Close()
}

// restConfig is a config whose requests the handler answers in process,
// in JSON (the handler speaks no protobuf). The user agent (hence the
// default field manager) and client-side throttling are the client's, as
// with any kubeconfig.
func restConfig(h http.Handler) *rest.Config {
	return &rest.Config{
		Host:      host,
		Transport: &inProcess{h: h},
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/json",
			AcceptContentTypes: "application/json",
		},
	}
}
