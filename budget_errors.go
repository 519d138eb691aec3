package retry

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrBudgetExhausted is matched (with errors.Is) by the error of a loop
	// that a [Budget] refused a retry, and by that of a call or request that
	// its hold refused or kept waiting until its context ended. That error
	// also wraps the last attempt's error, or the context's, when there is
	// one. See docs/budget.md.
	ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
	// ErrInvalidBudget is wrapped by the error of [Budget.Validate], and so
	// by that of a loop given an invalid or nil Budget through [WithBudget].
	ErrInvalidBudget = errors.New("retry: invalid budget")
)

// budgetError is returned when a Budget refuses a loop's retry.
type budgetError struct {
	attempts int
	last     error
}

func (e *budgetError) Error() string {
	return ErrBudgetExhausted.Error() + afterAttempts(e.attempts, e.last)
}

func (e *budgetError) Unwrap() []error {
	return []error{ErrBudgetExhausted, e.last}
}

// heldError is returned for a first attempt that a hold kept from going:
// at once for a loop without a context, or when ctx ended the wait. It
// matches ErrBudgetExhausted, and ctx's error and cause.
type heldError struct {
	scope  scope
	ctxErr error // nil: refused at once
	cause  error // context.Cause when it differs from ctxErr
}

func newHeldError(ctx context.Context, s scope) error {
	e := &heldError{scope: s, ctxErr: ctx.Err()}
	if e.ctxErr == nil { // a Context of the caller's own whose Done closed before its Err was set
		e.ctxErr = context.Canceled
	}
	if cause := context.Cause(ctx); cause != e.ctxErr {
		e.cause = cause
	}
	return e
}

func (e *heldError) Error() string {
	what := "the budget holds new calls while the server fails"
	if e.scope.kind != loopsScope {
		what = e.scope.String() + " " + isAre(e.scope) + " held"
	}
	var msg string
	switch {
	case e.ctxErr == nil:
		return ErrBudgetExhausted.Error() + ": " + what + ", and a call without a context cannot wait"
	case e.scope.kind == loopsScope:
		msg = ErrBudgetExhausted.Error() + ": the call waited for the budget's hold, until " + e.ctxErr.Error()
	default:
		msg = ErrBudgetExhausted.Error() + ": " + what + "; the request waited until " + e.ctxErr.Error()
	}
	if e.cause != nil {
		msg += " (cause: " + e.cause.Error() + ")"
	}
	return msg
}

func (e *heldError) Unwrap() []error {
	errs := []error{ErrBudgetExhausted}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// isAre is the verb for a scope's name: "writes of secrets are", a server
// "is".
func isAre(s scope) string {
	if s.kind == resourceScope {
		return "are"
	}
	return "is"
}

// wireRefusal is the error of a request that WrapTransport refused, a
// retry: the budget had none left, or its scope is held. Its message holds
// none of the texts by which client-go's net.IsProbableEOF and
// net.IsConnectionReset recognize a broken connection, and it is no
// timeout, so client-go resends nothing after it.
type wireRefusal struct {
	scope scope
	held  bool // the scope is held; else the budget had no retry left
}

func (e *wireRefusal) Error() string {
	if e.held {
		return ErrBudgetExhausted.Error() + ": " + e.scope.String() + " " + isAre(e.scope) + " held; the retry was not sent"
	}
	return ErrBudgetExhausted.Error() + ": the budget refused a retry of " + e.scope.String() + " and did not send it"
}

func (e *wireRefusal) Unwrap() error { return ErrBudgetExhausted }

// probeError is the error of a probe that failed with no HTTP answer: it
// names the scope probed and how long it has been held, then err's text,
// which stays the message's suffix (client-go matches some errors by
// their text); it wraps err, and does not match ErrBudgetExhausted: the
// request was sent.
type probeError struct {
	scope scope
	held  time.Duration
	err   error
}

func (e *probeError) Error() string {
	held := e.held.Round(time.Millisecond)
	if held >= time.Second {
		held = e.held.Round(100 * time.Millisecond)
	}
	return "retry: probe of " + e.scope.String() + ", held for " + held.String() + ": " + e.err.Error()
}

func (e *probeError) Unwrap() error { return e.err }
