package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

var (
	errNilFn        = errors.New("retry: fn is nil")
	errNilRetriable = errors.New("retry: retriable predicate is nil")
	errNilContext   = errors.New("retry: ctx is nil")
)

// IsTransient reports whether err is a failure that a later identical
// request may not meet: a predicate for [OnError] and [OnErrorValue] around
// a call to the API server. It is true for:
//   - an API error (found through wrapping) with status 429 Too Many
//     Requests, or 5xx other than 501 Not Implemented;
//   - a transport error that k8s.io/apimachinery/pkg/util/net recognizes
//     (IsConnectionRefused, IsConnectionReset, IsProbableEOF,
//     IsHTTP2ConnectionLost), and more that a reset or a restart gives: a
//     broken pipe (EPIPE, a write after the reset) and net/http's errors
//     for an HTTP/2 connection that failed or went away under the request
//     ("http2: client connection force closed via ClientConn.Close", "http2:
//     client conn could not be established", the server's graceful GOAWAY
//     and the like);
//   - a net.Error whose Timeout() is true, such as the transport's
//     ResponseHeaderTimeout or a net/http Client.Timeout;
//   - a Conflict whose status details name the kind resourcequotas of the
//     core group: the ResourceQuota admission of a kube-apiserver lost a
//     race to update the namespace's quota status, which on an HA control
//     plane (several kube-apiservers on one etcd) refuses a create or
//     update that is not the quota's, kubernetes/kubernetes#67761. The
//     same request may not meet it again. Where the request itself writes
//     a ResourceQuota, such a Conflict is an ordinary stale one, which
//     only a fresh read can mend: around a write of ResourceQuotas use
//     [RetryOnConflictWithContext] or [UpdateOnConflict] rather than
//     IsTransient.
//
// It is false for nil, for every other Conflict and every other 4xx, and for the
// context package's own errors, context.Canceled and
// context.DeadlineExceeded, wrapped too (a url.Error included): the caller
// gave up, and another attempt under the same context would fail as well.
// A net/http or net timeout answers errors.Is(err, context.DeadlineExceeded)
// with true too, but it is the timeout of one request, not the caller's, so
// it counts as transient. client-go, though, enforces rest.Config.Timeout
// twice, with a context of each request and with http.Client.Timeout, and
// the two race: a request through a stalled apiserver came back either as
// context.DeadlineExceeded itself, which cannot be told from the caller's
// own deadline and for which IsTransient is false, or as net/http's
// "Client.Timeout exceeded", for which it is true. To retry a request that
// a stalled server never answers, bound it with the transport's
// ResponseHeaderTimeout, or bound each attempt with [WithAttemptTimeout].
//
// The caller's own deadline, met while dialling, comes back as net's "i/o
// timeout" and counts as transient; a context loop then ends on its ctx
// before another attempt.
//
// A transport error after the request was sent leaves its outcome unknown:
// the server may have applied the change. Retry only a change that sets the
// state it wants (set a field, add a key), never one that builds on what it
// finds (an increment), which a repeat would apply twice; see
// [UpdateOnConflict].
func IsTransient(err error) bool { return transient(err, true) }

// transient is IsTransient, the quota admission's Conflict counted only
// when quota is true. For a Budget that Conflict is the server's answer,
// a race between apiservers, not a failing server: it never starts a hold,
// as no Conflict does.
func transient(err error, quota bool) bool {
	// An API error itself first: errors.As, and the variable its pointer
	// makes escape, would cost every failed attempt an allocation.
	if status, ok := err.(apierrors.APIStatus); ok {
		return transientStatus(status, quota)
	}
	if err == nil || errors.Is(err, context.Canceled) || isDeadlineExceeded(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return transientStatus(status, quota)
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, syscall.EPIPE) || isHTTP2ConnError(err.Error()) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// isQuotaConflict reports whether st is a Conflict on a ResourceQuota:
// what the quota admission returns when its update of the quota's status
// met another kube-apiserver's.
func isQuotaConflict(st metav1.Status) bool {
	// As apierrors.IsConflict: the reason, or a 409 that gives none (not
	// an AlreadyExists).
	return (st.Reason == metav1.StatusReasonConflict || st.Reason == "" && st.Code == http.StatusConflict) &&
		st.Details != nil && st.Details.Kind == "resourcequotas" && st.Details.Group == ""
}

// transientStatus reports whether an API error says a later identical
// request may pass: a code transientCode accepts, or, when quota is true,
// the quota admission's own Conflict.
func transientStatus(status apierrors.APIStatus, quota bool) bool {
	return transientCode(status) || quota && isQuotaConflict(status.Status())
}

// transientCode reports whether status's code is 429 or 5xx other than 501.
func transientCode(status apierrors.APIStatus) bool {
	code := int(status.Status().Code)
	return code == http.StatusTooManyRequests ||
		code >= 500 && code <= 599 && code != http.StatusNotImplemented
}

// isHTTP2ConnError reports whether msg is one of net/http's errors for an
// HTTP/2 client connection that failed or went away under the request
// (h2_bundle.go): "http2: client conn is closed", "... not usable", "...
// could not be established", "http2: client connection force closed via
// ClientConn.Close" (every request still in flight on a connection that
// net/http closes after a write on it failed), "http2: client connection
// lost", and the server's graceful shutdown GOAWAY. Of these,
// utilnet.IsHTTP2ConnectionLost recognizes only the lost connection.
func isHTTP2ConnError(msg string) bool {
	return strings.Contains(msg, "http2: client conn") ||
		strings.Contains(msg, "http2: Transport received Server's graceful shutdown GOAWAY")
}

// isDeadlineExceeded reports whether context.DeadlineExceeded itself is in
// err's tree. Unlike errors.Is, it does not ask the errors' Is methods, by
// which net/http's and net's timeouts claim to be DeadlineExceeded.
func isDeadlineExceeded(err error) bool { return inTree(err, context.DeadlineExceeded) }

// inTree reports whether target itself is in err's tree, found through
// Unwrap alone: errors.Is without the Is methods. It is cheap on an error
// that wraps nothing, as most of a loop's failed attempts return.
func inTree(err, target error) bool {
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		return wrapsTarget(err, target)
	}
	return err == target
}

func wrapsTarget(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if inTree(inner, target) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// contextError is returned when a context ends a loop. It matches the
// context's error, its cause when that differs, and the last attempt's
// error.
type contextError struct {
	ctxErr   error
	cause    error // context.Cause(ctx) when it differs from ctxErr, else nil
	attempts int
	last     error         // nil when no attempt was made
	wait     time.Duration // > 0: the wait not started because it would outlast the deadline
}

// newContextError builds the error for a loop that ctx, which is done,
// ended after attempts attempts, the last of which failed with last.
func newContextError(ctx context.Context, attempts int, last error) error {
	e := &contextError{ctxErr: ctx.Err(), attempts: attempts, last: last}
	if cause := context.Cause(ctx); cause != e.ctxErr {
		e.cause = cause
	}
	return e
}

// newDeadlineError builds the error for a loop that did not start a wait
// of wait because it would end after ctx's deadline (or the deadline has
// passed and ctx does not know it yet). ctx is not done, so its cause is
// not known: the error matches DeadlineExceeded alone.
func newDeadlineError(attempts int, last error, wait time.Duration) error {
	return &contextError{ctxErr: context.DeadlineExceeded, attempts: attempts, last: last, wait: wait}
}

func (e *contextError) Error() string {
	what := e.ctxErr.Error()
	switch {
	case e.wait > 0:
		what = fmt.Sprintf("waiting %v would exceed the context deadline", e.wait)
	case e.cause != nil:
		what += " (cause: " + e.cause.Error() + ")"
	}
	if e.last == nil {
		return "retry: " + what + " before the first attempt"
	}
	return "retry: " + what + afterAttempts(e.attempts, e.last)
}

// afterAttempts ends a loop's error message: " after 2 attempts, last
// error: ...".
func afterAttempts(n int, last error) string {
	unit := "attempts"
	if n == 1 {
		unit = "attempt"
	}
	return fmt.Sprintf(" after %d %s, last error: %v", n, unit, last)
}

func (e *contextError) Unwrap() []error {
	errs := make([]error, 0, 3)
	errs = append(errs, e.ctxErr)
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	if e.last != nil {
		errs = append(errs, e.last)
	}
	return errs
}

// IsApplyConflict reports whether err is a Server-Side Apply conflict: the
// API error that apierrors.IsConflict finds (the first APIStatus in err's
// tree, through wrapping and errors.Join) has reason Conflict and a cause
// of type FieldManagerConflict, because the apply set a field that another
// field manager owns. Sending the same apply again can never succeed, so
// [RetryOnConflict], [RetryOnConflictWithContext], [UpdateOnConflict] and
// [CreateOrUpdate] return it at once instead of retrying it; the caller
// either drops the field from its apply or forces the apply
// (metav1.PatchOptions.Force). [IsTransient] is false for it too.
func IsApplyConflict(err error) bool {
	// err itself first: errors.As, and the variable its pointer makes
	// escape, would cost every attempt of a conflict loop an allocation.
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		var wrapped apierrors.APIStatus
		if !errors.As(err, &wrapped) {
			return false
		}
		status = wrapped
	}
	st := status.Status()
	if st.Reason != metav1.StatusReasonConflict || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// isRetriableConflict is the predicate of the conflict loops: a Conflict
// that another attempt, reading the object afresh, may not meet.
func isRetriableConflict(err error) bool {
	return apierrors.IsConflict(err) && !IsApplyConflict(err)
}
