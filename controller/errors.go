package controller

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrLeaderElectionLost is returned by Run when the instance stopped leading
// without being asked to: another instance may be writing now, so the
// process should exit and start afresh.
var ErrLeaderElectionLost = errors.New("leader election lost")

// ErrShutdownGraceExceeded is returned by Run when in-flight reconciles did
// not finish within Config.ShutdownGrace and had to be cancelled.
var ErrShutdownGraceExceeded = errors.New("shutdown grace exceeded")

// permanentError is a failure retrying cannot fix: the Deployment itself is
// invalid for the scaler. It is reported once as a Warning Event.
type permanentError struct {
	reason string // Event reason
	err    error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanentf(reason, format string, args ...any) error {
	return &permanentError{reason: reason, err: fmt.Errorf(format, args...)}
}

// retryable says whether retrying err with backoff can help. Conflicts,
// throttling, server errors, timeouts and transport errors can; a request
// the server judged invalid, or a Deployment the scaler cannot act on,
// cannot.
func retryable(err error) bool {
	var perm *permanentError
	if errors.As(err, &perm) {
		return false
	}
	switch {
	case apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err),
		apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err):
		return false
	}
	return true
}

// eventReason is the Event reason for a permanent failure.
func eventReason(err error) string {
	var perm *permanentError
	if errors.As(err, &perm) {
		return perm.reason
	}
	return ReasonRejected
}

func errUnexpected(what string, obj any) error {
	return fmt.Errorf("%s: unexpected object of type %T", what, obj)
}
