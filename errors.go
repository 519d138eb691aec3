package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The errors of a loop given an invalid argument: each names the argument.
var (
	errNilFn        = errors.New("retry: fn is nil")
	errNilRetriable = errors.New("retry: retriable predicate is nil")
	errNilContext   = errors.New("retry: ctx is nil")
	errNilGet       = errors.New("retry: get is nil and current carries no resourceVersion (it is the zero object, one the caller built, or one without object metadata): only an object with a resourceVersion is written without a read, so the first attempt needs get")
	errNilGetCreate = errors.New("retry: get is nil")
	errNilMutate    = errors.New("retry: mutate is nil")
	errNilCreate    = errors.New("retry: create is nil")
	errNilUpdate    = errors.New("retry: update is nil")
	errNilPatch     = errors.New("retry: patch is nil")
	errNilCurrent   = errors.New("retry: current is the zero object; it must name the object to create or update")
	errNilClient    = errors.New("retry: the client c is nil")
)

// errGetNoObj ends a write loop whose get returned neither an object nor
// an error.
var errGetNoObj = errors.New("retry: get returned neither an object nor an error")

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
