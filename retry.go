package retry

import (
	"context"
	"time"

	"github.com/kuberetry/retry/internal/objrules"
)

// DefaultRetry is the recommended backoff for a conflict where several
// clients change the same object: 5 attempts about 10ms apart. It has the
// values of client-go's retry.DefaultRetry.
var DefaultRetry = Backoff{
	Steps:    5,
	Duration: 10 * time.Millisecond,
	Factor:   1.0,
	Jitter:   0.1,
}

// DefaultBackoff is the recommended backoff for a conflict where a client
// changes an object that controllers also manage: 4 attempts with waits of
// about 10ms, 50ms and 250ms. It has the values of client-go's
// retry.DefaultBackoff.
var DefaultBackoff = Backoff{
	Steps:    4,
	Duration: 10 * time.Millisecond,
	Factor:   5.0,
	Jitter:   0.1,
}

// HotObjectBackoff is the backoff for an object that many writers update
// at once, when their number is unknown: up to 30 attempts, the first
// retry after 5ms to 10ms, each later wait 1.3 times the one before
// (Jitter 1.0: each wait d to 2d). Alone it gets every update through
// from 1 to 128 writers on one object; with [WithContention] its waits
// start where the number of writers needs them, which makes it the best
// or within 1.5x of the best peer's p99 at each number. The study that
// chose it, on a real kube-apiserver: the repository's docs/contention.md.
var HotObjectBackoff = Backoff{Steps: 30, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1.0}

// DefaultRetryAfterBackoff is a backoff for [OnRetryAfterError]: 1 attempt
// and up to 10 retries, as client-go's rest.Request makes by default, each
// wait at least 1s and longer when the server asks for longer. The 1s floor
// keeps a server that suggests a delay of 0 (a 500 ServerTimeout may) from
// turning the loop into a hot loop.
var DefaultRetryAfterBackoff = Backoff{Steps: 11, Duration: time.Second, Factor: 1.0}

// OnError calls fn until it returns nil, returns an error that retriable
// rejects, or backoff allows no further attempt, waiting [Backoff.Step]
// between attempts. It mirrors client-go's retry.OnError: fn is called at
// most backoff.Steps times; on exhaustion the last retriable error is
// returned itself, not wrapped. Reaching backoff.Cap ends the loop after
// that wait unless [WithContinueAtCap] is given.
//
// Unlike client-go, an invalid backoff (see [Backoff.Validate]), a nil fn or
// a nil retriable returns an error at once and calls nothing. A panic in fn
// or retriable reaches the caller unchanged. OnError starts no goroutine and
// is safe for concurrent use.
func OnError(backoff Backoff, retriable func(error) bool, fn func() error, opts ...Option) error {
	return run(context.Background(), backoff, retriable, attemptFunc{plain: fn}, nil, opts)
}

// RetryOnConflict is [OnError] for an update that may meet a 409 Conflict:
// it retries an error that apierrors.IsConflict matches, unless it is an
// apply conflict ([IsApplyConflict]), which no retry of the same apply can
// resolve and which is returned at once. fn should get the object afresh,
// change it, update it and return the update's error as it is (a wrapped
// error is matched too). It mirrors client-go's retry.RetryOnConflict,
// which retries an apply conflict Steps times in vain.
func RetryOnConflict(backoff Backoff, fn func() error, opts ...Option) error {
	return run(context.Background(), backoff, objrules.RetriableConflict, attemptFunc{plain: fn}, nil, opts)
}

// OnRetryAfterError is [OnError] that honours a server's Retry-After: it is
// OnError with [WithRetryAfter]([RetryAfter]) preset, so each wait is the
// longer of [Backoff.Step] and the delay the last error carries, then
// bounded by [WithMaxDelay]. [IsRetryAfterError] is the usual predicate and
// [DefaultRetryAfterBackoff] the usual backoff.
//
// A call through a client-go clientset already retries a 429 or 5xx that
// carries a Retry-After, up to 10 times (rest.Request's default
// MaxRetries), so around such a call this loop multiplies the requests: up
// to 11 per attempt. Use it for a RESTClient request with MaxRetries(0), a
// plain HTTP call, or where the caller wants its own bound.
func OnRetryAfterError(backoff Backoff, retriable func(error) bool, fn func() error, opts ...Option) error {
	return run(context.Background(), backoff, retriable, attemptFunc{plain: fn}, RetryAfter, opts)
}

// OnErrorWithContext is [OnError] under a context. ctx is checked before every
// attempt and before every wait, and fn receives it; if ctx is done before
// the first attempt, fn is never called. The default sleeper cuts a wait
// short when ctx is done, and does not start a wait that would end after
// ctx's deadline; a [Sleeper] given by [WithSleeper] is called as it is and
// ctx is checked when it returns. A nil ctx returns an error at once.
//
// A loop ended by ctx returns an error that matches ctx's error
// (context.Canceled or context.DeadlineExceeded) and context.Cause(ctx) with
// [errors.Is], and that also wraps the last attempt's error, if any, so
// apierrors.IsConflict still holds. A wait not started because it would
// outlast the deadline ends the loop with an error that matches
// context.DeadlineExceeded and says so (the deadline's cause is not known
// yet then, so it is not wrapped). An error fn returns that retriable
// rejects is returned as it is, context errors included, even when ctx is
// done.
func OnErrorWithContext(ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) error, opts ...Option) error {
	return run(ctx, backoff, retriable, attemptFunc{withCtx: fn}, nil, opts)
}

// RetryOnConflictWithContext is [RetryOnConflict] under a context, as
// described at [OnErrorWithContext].
func RetryOnConflictWithContext(ctx context.Context, backoff Backoff, fn func(context.Context) error, opts ...Option) error {
	return run(ctx, backoff, objrules.RetriableConflict, attemptFunc{withCtx: fn}, nil, opts)
}

// OnRetryAfterErrorWithContext is [OnRetryAfterError] under a context, as
// described at [OnErrorWithContext].
func OnRetryAfterErrorWithContext(ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) error, opts ...Option) error {
	return run(ctx, backoff, retriable, attemptFunc{withCtx: fn}, RetryAfter, opts)
}

// OnErrorValue is [OnErrorWithContext] for an fn that returns a value, such
// as a typed client's Get or Update: every rule of the context loops holds.
// On success it returns the value of the attempt that returned nil; with any
// error it returns the zero T. The success path with no options does not
// allocate.
func OnErrorValue[T any](ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	var v, zero T
	if fn == nil {
		return zero, errNilFn
	}
	err := run(ctx, backoff, retriable, attemptFunc{withCtx: func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	}}, nil, opts)
	if err != nil {
		return zero, err
	}
	return v, nil
}
