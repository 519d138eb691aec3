package retry

// The Budget's classifier: every decision of what an error or an HTTP
// answer means for a scope is here. judge decides it for a loop's attempt,
// wireOutcome for a request on the wire (the table "What a failure of each
// scope is" of docs/budget.md), isLease and isWatch what passes through
// and what is charged once; a failure is kept as it came until a hold
// needs it as an error.

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// outcome is what an attempt's result says about the server, for a
// [Budget]'s hold and for the transport's view of the next attempt.
type outcome uint8

const (
	// answered: a success, or an error the server gave that another
	// attempt would meet as well (a Conflict, a NotFound).
	answered outcome = iota
	// failedTransiently: a failure another attempt may not meet.
	failedTransiently
	// unanswered: a context ended the attempt first.
	unanswered
	// budgetRefused: a Budget refused the attempt or its request, which
	// so never reached the server.
	budgetRefused
)

// judge decides whether a loop's attempt that returned err failed
// transiently: [IsTransient] holds for it, and it is not a
// Conflict (the quota admission's is the server's answer too). A refusal
// by a Budget (the transport's, or an inner loop's), and a context's
// error, say nothing about the server.
func judge(err error) outcome {
	switch {
	case err == nil:
		return answered
	case errors.Is(err, ErrBudgetExhausted):
		return budgetRefused
	case transient(err, false):
		return failedTransiently
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return unanswered
	}
	return answered
}

// attemptOutcome is what a loop's attempt that returned err says: one
// that ran out of its own time (timedOut) failed transiently; otherwise
// judge decides when the loop needs it (needed: it has a Budget, or marks
// its next attempt), and else only a Budget's refusal of an error the
// loop would retry is told apart, as it ends the loop at once.
func attemptOutcome(err error, timedOut, retry, needed bool) outcome {
	switch {
	case err == nil:
		return answered
	case timedOut:
		return failedTransiently
	case needed:
		return judge(err)
	case retry && errors.Is(err, ErrBudgetExhausted):
		return budgetRefused
	}
	return answered
}

// wireOutcome judges a round trip for the request's server and its
// resource: no HTTP response and a 429 are failures of the server, a 5xx
// (not 501) of the resource, or of the server when the path names no
// resource; any other response answers both (a 5xx to a request with a
// resource still answers its server). A context that ended the request,
// or a Budget's refusal below, says nothing. resends reports whether
// client-go sends req again itself after it (rest.Request's request and
// Watch, through withRetry.IsNextRetry).
func wireOutcome(req *http.Request, resp *http.Response, err error, hasResource bool) (server, resource outcome, resends bool) {
	if err != nil {
		switch {
		case errors.Is(err, ErrBudgetExhausted):
			return budgetRefused, budgetRefused, false
		case req.Context().Err() != nil:
			return unanswered, unanswered, false
		case req.Method != http.MethodGet:
			return failedTransiently, unanswered, false
		case isWatch(req.URL):
			return failedTransiently, unanswered, utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
		}
		return failedTransiently, unanswered, utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests:
		server, resource = failedTransiently, unanswered
	case c >= 500 && c != http.StatusNotImplemented:
		server, resource = answered, failedTransiently
		if !hasResource {
			server = failedTransiently
		}
	default:
		return answered, answered, false
	}
	// client-go resends a 429 or 5xx whose Retry-After strconv.Atoi reads,
	// unless the request's body is a stream it cannot send twice.
	if streamedBody(req) {
		return server, resource, false
	}
	if h := resp.Header.Get("Retry-After"); h != "" {
		_, aerr := strconv.Atoi(h)
		return server, resource, aerr == nil
	}
	return server, resource, false
}

// resentAfter returns the kind of the scope whose failure client-go resends
// a request after (resends): its server's when the server failed, else its
// resource's; noScope when client-go does not resend it.
func resentAfter(resends bool, server outcome) scopeKind {
	switch {
	case !resends:
		return noScope
	case server == failedTransiently:
		return serverScope
	}
	return resourceScope
}

// streamedBody reports whether req's body cannot be read again: client-go
// resends no request built from an io.Reader (its Body(io.Reader)), and
// net/http sets GetBody for the byte slices client-go otherwise sends.
func streamedBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.GetBody == nil
}

// failure is a transient failure, kept as it came until a hold that it
// starts needs it as an error: a request's error, or an HTTP answer's
// status (code 0: none); for a 429, the Retry-After it asked for at at (0:
// none).
type failure struct {
	err        error
	code       int
	status     string
	retryAfter time.Duration
	at         time.Time
}

// error returns the failure as HoldEvent.Err: nil for none.
func (f failure) error() error {
	switch {
	case f.code != 0:
		return &statusError{code: f.code, status: f.status, retryAfter: f.retryAfter}
	case f.err != nil && f.retryAfter > 0:
		return &retryAfterError{err: f.err, retryAfter: f.retryAfter}
	}
	return f.err
}

// answerFailure is the failure of an HTTP answer resp, received at now.
func answerFailure(resp *http.Response, now time.Time) failure {
	f := failure{code: resp.StatusCode, status: resp.Status}
	if resp.StatusCode == http.StatusTooManyRequests {
		if d, ok := ResponseRetryAfter(resp, now); ok {
			f.retryAfter, f.at = d, now
		}
	}
	return f
}

// errFailure is the failure of an attempt that returned err at now: a
// 429's keeps the delay that the API error suggests.
func errFailure(err error, now time.Time) failure {
	f := failure{err: err}
	if apierrors.IsTooManyRequests(err) {
		if d, ok := RetryAfter(err); ok {
			f.retryAfter, f.at = d, now
		}
	}
	return f
}

// statusError is the failure of an HTTP answer, for HoldEvent.Err.
type statusError struct {
	code       int
	status     string // as net/http gives it: "503 Service Unavailable"; "" to make
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	status := e.status
	if status == "" {
		status = strconv.Itoa(e.code) + " " + http.StatusText(e.code)
	}
	return "retry: the server answered " + status + retryAfterText(e.retryAfter)
}

// retryAfterError is an attempt's 429 with the Retry-After it asked for,
// for HoldEvent.Err.
type retryAfterError struct {
	err        error
	retryAfter time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() + retryAfterText(e.retryAfter) }

func (e *retryAfterError) Unwrap() error { return e.err }

func retryAfterText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " (Retry-After " + d.String() + ")"
}

// isLease reports whether path is a coordination.k8s.io Lease's, or their
// collection's.
func isLease(path string) bool {
	_, rest, ok := strings.Cut(path, "/apis/coordination.k8s.io/")
	return ok && strings.Contains(rest, "/leases")
}

// isWatch reports whether u starts a watch: watch=true (or 1) in the
// query, as client-go sends, or the old /watch/ path.
func isWatch(u *url.URL) bool {
	for q := u.RawQuery; q != ""; {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "watch=true" || kv == "watch=1" {
			return true
		}
	}
	return strings.Contains(u.Path, "/watch/")
}
