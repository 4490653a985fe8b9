package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Fault is one kind of failure aimed at some requests.
type Fault interface {
	// Name is the fault's short name, as recorded in the history.
	Name() string
	// Target selects the requests (or, for watch faults, the watched
	// objects) the fault applies to.
	Target() Target
	// Available says whether the fault means what it says on a layer: nil,
	// or why not.
	Available(Layer) error
}

// Layer is where faults are injected.
type Layer string

// Layers.
const (
	// HTTP: the RoundTripper of in-process clients of a real API server.
	HTTP Layer = "http"
	// Clientset: reactors and watch proxies on a fake clientset.
	Clientset Layer = "clientset"
)

// everywhere is embedded by faults that mean the same on every layer.
type everywhere struct{}

func (everywhere) Available(Layer) error { return nil }

// retriedByRESTClient is embedded by faults whose effect depends on
// client-go's REST client retrying them, which the fake has not.
type retriedByRESTClient struct{}

func (retriedByRESTClient) Available(l Layer) error {
	if l == Clientset {
		return errors.New("the fake clientset has no REST client: a 429 or a 5xx with Retry-After reaches the caller instead of being retried")
	}
	return nil
}

// requestFault answers a request in place of the server, or delays it.
type requestFault interface {
	Fault
	// answer is what the fault does to r, built once: each layer derives
	// its own from it (answer.http, answer.fake).
	answer(r Request) answer
}

// answer is a request fault's answer to one request: a status the API
// server could have sent, a refused connection, or a hold before the
// request goes on.
type answer struct {
	// status is an API error (apierrors.APIStatus); its Retry-After, if
	// any, is its details' RetryAfterSeconds.
	status error
	// refused: the connection is refused, as by a partition.
	refused bool
	// hold delays the request before it goes on.
	hold time.Duration
}

// http is the answer on the HTTP layer: a response, an error, or neither
// to pass the request on (after holding it).
func (a answer) http(req *http.Request) (*http.Response, error) {
	switch {
	case a.status != nil:
		retryAfter := 0
		if s, ok := a.status.(apierrors.APIStatus); ok && s.Status().Details != nil {
			retryAfter = int(s.Status().Details.RetryAfterSeconds)
		}
		return statusResponse(a.status, retryAfter)
	case a.refused:
		return nil, refused(req.URL.Host)
	case a.hold > 0:
		timer := time.NewTimer(a.hold)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return nil, nil
}

// fake is the answer on the fake layer: the error to answer with, or nil
// to pass the request on. A hold is not available there (see
// latency.Available).
func (a answer) fake() error {
	switch {
	case a.status != nil:
		return a.status
	case a.refused:
		return refused("in-process")
	}
	return nil
}

// watchFault acts on the frames of a watch stream.
type watchFault interface {
	Fault
	// onEvent says what to do with an event (ADDED, MODIFIED, DELETED) of
	// a watched object the target selects.
	onEvent(eventType string) frameAction
}

type frameAction struct {
	drop      bool
	delay     time.Duration
	duplicate bool
	closeNow  bool // end the stream before this frame
	expire    bool // end the stream with a 410 ERROR frame after this one
}

// Conflict answers update and patch requests of the target with 409.
func Conflict(t Target) Fault {
	if len(t.Verbs) == 0 {
		t.Verbs = []string{"update", "patch"}
	}
	return conflict{t: t}
}

type conflict struct {
	everywhere
	t Target
}

func (f conflict) Name() string   { return FaultConflict }
func (f conflict) Target() Target { return f.t }
func (f conflict) answer(r Request) answer {
	return answer{status: apierrors.NewConflict(schema.GroupResource{Group: r.Group, Resource: r.Resource}, r.Name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))}
}

// Throttle answers with 429 Too Many Requests and an integer Retry-After,
// which client-go's REST client honours before retrying.
func Throttle(t Target, retryAfterSeconds int) Fault {
	return throttle{t: t, retryAfter: max(retryAfterSeconds, 1)}
}

type throttle struct {
	retriedByRESTClient
	t          Target
	retryAfter int
}

func (f throttle) Name() string   { return FaultThrottle }
func (f throttle) Target() Target { return f.t }
func (f throttle) answer(Request) answer {
	return answer{status: apierrors.NewTooManyRequests("converge: injected throttling", f.retryAfter)}
}

// ServerError answers with code (500..599). With retryAfterSeconds > 0 the
// answer carries Retry-After and the REST client retries it itself;
// without, the error reaches the caller.
func ServerError(t Target, code, retryAfterSeconds int) Fault {
	if code < 500 || code > 599 {
		code = http.StatusInternalServerError
	}
	return serverError{t: t, code: code, retryAfter: max(retryAfterSeconds, 0)}
}

type serverError struct {
	t          Target
	code       int
	retryAfter int
}

func (f serverError) Name() string { return FaultServerError }

func (f serverError) Available(l Layer) error {
	if f.retryAfter > 0 {
		return retriedByRESTClient{}.Available(l)
	}
	return nil
}
func (f serverError) Target() Target { return f.t }
func (f serverError) answer(Request) answer {
	return answer{status: apierrors.NewGenericServerResponse(f.code, "", schema.GroupResource{}, "", "converge: injected server error", f.retryAfter, true)}
}

// Latency holds requests of the target for d before sending them on.
func Latency(t Target, d time.Duration) Fault { return latency{t: t, d: d} }

type latency struct {
	t Target
	d time.Duration
}

// Available: not on the fake layer, where a reactor runs under the
// clientset's lock.
func (latency) Available(l Layer) error {
	if l == Clientset {
		return errors.New("a fake clientset's reactor runs under its lock: a delay there stalls every other call of that client, and in a synctest bubble goroutines waiting on a mutex keep virtual time from advancing")
	}
	return nil
}

func (f latency) Name() string          { return FaultLatency }
func (f latency) Target() Target        { return f.t }
func (f latency) answer(Request) answer { return answer{hold: f.d} }

// Partition fails requests of the target as a refused connection would,
// without reaching the server.
func Partition(t Target) Fault { return partition{t: t} }

type partition struct {
	everywhere
	t Target
}

func (f partition) Name() string          { return FaultPartition }
func (f partition) Target() Target        { return f.t }
func (f partition) answer(Request) answer { return answer{refused: true} }

// refused is the error of a connection to host refused.
func refused(host string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: addr(host), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// WatchExpired answers watch requests of the target with HTTP 410 Gone
// (reason Expired): the reflector relists. Schedule it (a trigger or a
// window): answering every watch with 410 makes a reflector spin.
func WatchExpired(t Target) Fault {
	t.Verbs = []string{"watch"}
	return watchExpired{t: t}
}

type watchExpired struct {
	everywhere
	t Target
}

func (f watchExpired) Name() string   { return FaultWatchExpired }
func (f watchExpired) Target() Target { return f.t }
func (f watchExpired) answer(Request) answer {
	return answer{status: apierrors.NewResourceExpired("converge: injected, too old resource version")}
}

// WatchExpiredMidStream ends a watch stream with an ERROR frame (code 410,
// reason Expired) after a frame of a target object: the reflector relists.
func WatchExpiredMidStream(t Target) Fault {
	return frameFault{name: FaultWatchExpiredMidStream, t: t, action: frameAction{expire: true}}
}

// WatchDrop swallows the frames of target objects: the informer misses
// those changes until it relists.
func WatchDrop(t Target) Fault {
	return frameFault{name: FaultWatchDrop, t: t, action: frameAction{drop: true}}
}

// WatchLost drops a frame of target objects and ends the stream with 410,
// as an API server whose watch cache fell behind would: the reflector
// relists, and the informer learns of the change from the relist (an
// update from the state before it to the state after, or an add) rather
// than from its event. Unlike WatchDrop, nothing stays unseen.
func WatchLost(t Target) Fault {
	return frameFault{name: FaultWatchLost, t: t, action: frameAction{drop: true, expire: true}}
}

// WatchDelay holds each frame of target objects for d (and, the stream
// being ordered, every frame behind it).
func WatchDelay(t Target, d time.Duration) Fault {
	return frameFault{name: FaultWatchDelay, t: t, action: frameAction{delay: d}}
}

// WatchDuplicate sends frames of target objects twice.
func WatchDuplicate(t Target) Fault {
	return frameFault{name: FaultWatchDuplicate, t: t, action: frameAction{duplicate: true}}
}

// WatchClose ends the stream before a frame of a target object: the
// reflector watches again from the last resourceVersion it saw, and the
// frame is delivered on the new stream.
func WatchClose(t Target) Fault {
	return frameFault{name: FaultWatchClose, t: t, action: frameAction{closeNow: true}}
}

// Tombstone drops the DELETED frame of target objects and ends the stream
// with 410: the relist no longer holds the object, so DeleteFunc receives a
// cache.DeletedFinalStateUnknown.
func Tombstone(t Target) Fault {
	return tombstone{t: t}
}

type tombstone struct {
	everywhere
	t Target
}

func (f tombstone) Name() string   { return FaultTombstone }
func (f tombstone) Target() Target { return f.t }
func (f tombstone) onEvent(eventType string) frameAction {
	if eventType != "DELETED" {
		return frameAction{}
	}
	return frameAction{drop: true, expire: true}
}

type frameFault struct {
	everywhere
	name   string
	t      Target
	action frameAction
}

func (f frameFault) Name() string               { return f.name }
func (f frameFault) Target() Target             { return f.t }
func (f frameFault) onEvent(string) frameAction { return f.action }

// statusResponse is an HTTP answer carrying err's metav1.Status, as the API
// server sends it.
func statusResponse(err error, retryAfter int) (*http.Response, error) {
	var status metav1.Status
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s.Status()
	}
	status.Kind, status.APIVersion = "Status", "v1"
	body, mErr := json.Marshal(status)
	if mErr != nil {
		return nil, mErr
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	return &http.Response{
		StatusCode:    int(status.Code),
		Status:        fmt.Sprintf("%d %s", status.Code, http.StatusText(int(status.Code))),
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		ProtoMajor:    1, ProtoMinor: 1,
	}, nil
}
