package retry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kuberetry/retry/internal/objrules"
)

// IsTransient reports whether err is a failure that a later identical
// request may not meet: a predicate for [OnError] and [OnErrorValue] around
// a call to the API server. It is true for an API error (found through
// wrapping) with status 429 or 5xx other than 501; a refused, reset or
// broken connection, an EOF or a lost HTTP/2 connection; a net.Error whose
// Timeout() is true; and a Conflict on the core group's resourcequotas, the
// race of an HA control plane's quota admission
// (kubernetes/kubernetes#67761). It is false for nil, every other Conflict
// and 4xx, and context.Canceled and context.DeadlineExceeded, wrapped too:
// the caller gave up. Around a write of ResourceQuotas themselves, use
// [RetryOnConflictWithContext] or [UpdateOnConflict] instead.
//
// A request a stalled server never answers may come back as
// context.DeadlineExceeded, not transient: bound each attempt with
// [WithAttemptTimeout]. A transport error after the request was sent
// leaves its outcome unknown: retry only a change that sets the state it
// wants. The full list, and why each case counts:
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#retry-after-and-what-may-pass.
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

// isDeadlineExceeded reports whether context.DeadlineExceeded itself is
// in err's tree, found through Unwrap alone. errors.Is would also ask each
// error's Is method, and net/http's and net's timeouts answer true for
// DeadlineExceeded: but those are the timeout of one request, which
// another attempt may not meet, while DeadlineExceeded itself is a
// context's (the caller's, or client-go's rest.Config.Timeout), which
// another attempt under the same context would meet as well.
func isDeadlineExceeded(err error) bool {
	for err != nil {
		if err == context.DeadlineExceeded {
			return true
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if isDeadlineExceeded(inner) {
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

// IsApplyConflict reports whether err is a Server-Side Apply conflict: the
// API error that apierrors.IsConflict finds (the first APIStatus in err's
// tree, through wrapping and errors.Join) has reason Conflict and a cause
// of type FieldManagerConflict, because the apply set a field that another
// field manager owns. Sending the same apply again can never succeed, so
// [RetryOnConflict], [RetryOnConflictWithContext], [UpdateOnConflict] and
// [CreateOrUpdate] return it at once instead of retrying it; the caller
// either drops the field from its apply or forces the apply
// (metav1.PatchOptions.Force). [IsTransient] is false for it too.
func IsApplyConflict(err error) bool { return objrules.IsApplyConflict(err) }
