package retry

import (
	"context"
	"errors"
	"net"
	"time"
)

// attemptFunc is fn in one of three shapes, one set. The plain loops pass
// theirs as it is, which saves the call through an adapter on every
// attempt. A write loop's attempt judges its own error (write), because
// whether it may pass on another attempt depends on which step failed:
// update's Conflict is retried, the same Conflict from get or mutate is
// not.
type attemptFunc struct {
	plain   func() error
	withCtx func(context.Context) error
	write   func(context.Context) (retry bool, err error)
}

// call makes one attempt and reports whether its error may pass on
// another attempt.
func (f attemptFunc) call(ctx context.Context, retriable func(error) bool) (retry bool, err error) {
	switch {
	case f.plain != nil:
		err = f.plain()
	case f.withCtx != nil:
		err = f.withCtx(ctx)
	default:
		return f.write(ctx)
	}
	return err != nil && retriable(err), err
}

// run is the one loop behind every exported loop. ctx is
// context.Background() for the loops whose fn takes none (fn.plain), whose
// first attempt a hold cannot keep waiting. retriable judges fn's errors
// (nil for a write attempt, which judges its own). retryAfter is the
// loop's default server-delay source (nil for none), which
// [WithRetryAfter] replaces.
func run(ctx context.Context, b Backoff, retriable func(error) bool, fn attemptFunc, retryAfter func(error) (time.Duration, bool), opts []Option) error {
	switch {
	case fn.plain == nil && fn.withCtx == nil && fn.write == nil:
		return errNilFn
	case fn.plain == nil && ctx == nil:
		return errNilContext
	case retriable == nil && fn.write == nil:
		return errNilRetriable
	}
	if !b.valid() {
		return b.invalid()
	}
	o := options{retryAfter: retryAfter}
	if len(opts) > 0 {
		o.apply(opts, retryAfter)
		if err := o.validate(fn.plain != nil); err != nil {
			return err
		}
	}
	budget := o.budget       // nil: none
	done := ctx.Done()       // nil: ctx is never done, and has no deadline
	given := b               // the backoff as given, for o.contention's bounds
	var waited time.Duration // the base of the last wait, for o.contention

	steps := b.Steps // b.Steps counts down as b steps; attempts count up to this
	var lastErr error
	afterTransient := false // the previous attempt failed transiently
	for attempt := 1; ; attempt++ {
		if done != nil && ctx.Err() != nil {
			return o.done(attempt-1, newContextError(ctx, attempt-1, lastErr), false)
		}
		var probe uint64 // the first attempt's, when a hold lets it go as the probe
		if attempt == 1 && budget != nil {
			var err error
			if probe, err = budget.admitLoop(ctx, fn.plain == nil); err != nil {
				return o.done(0, err, false)
			}
		}
		actx := ctx
		if fn.plain == nil {
			actx = attemptContext(ctx, budget, afterTransient)
		}
		var retry, timedOut bool
		var err error
		switch {
		case probe != 0:
			retry, timedOut, err = o.probe(budget, probe, actx, fn, retriable)
		case o.attemptTimeout > 0:
			retry, timedOut, err = o.timedAttempt(actx, fn, retriable)
		default:
			retry, err = fn.call(actx, retriable)
		}
		// judged for the budget, and for the next attempt's mark
		out := attemptOutcome(err, timedOut, retry, budget != nil || retry && fn.plain == nil)
		if budget != nil {
			budget.observeLoop(attempt == 1, probe, out, err)
		}
		if o.contention != nil {
			o.contention.learn(&given, waited, err, retry)
		}
		if !retry || out == budgetRefused {
			return o.done(attempt, err, false)
		}
		lastErr = err
		afterTransient = out == failedTransiently
		if attempt >= steps {
			return o.done(attempt, err, true)
		}

		if o.contention != nil {
			b.Duration = o.contention.wait(&given, b.Duration)
			waited = max(b.Duration, 1) // > 0: a wait came first
		}
		d := b.step(o.rand)
		final := b.Steps == 0 && !o.continueAtCap // the step reached Cap
		if o.fullJitter {
			d = scaleFloat(draw(o.rand) * float64(d))
		}
		var serverDelay time.Duration
		if o.retryAfter != nil {
			if sd, ok := o.retryAfter(err); ok {
				serverDelay = max(sd, 0)
				d = max(d, serverDelay)
			}
		}
		if o.maxDelay > 0 {
			d = min(d, o.maxDelay)
		}

		if done != nil {
			if cerr := o.contextEnds(ctx, attempt, err, d); cerr != nil {
				return o.done(attempt, cerr, false)
			}
		}
		if !final && budget != nil && !budget.chargeLoopRetry(afterTransient, err) {
			return o.done(attempt, &budgetError{attempts: attempt, last: err}, false)
		}
		if o.onRetry != nil {
			o.onRetry(RetryEvent{Attempt: attempt, Err: err, Delay: d, RetryAfter: serverDelay, Final: final})
		}
		o.sleep(done, d)
		if final {
			if done != nil && ctx.Err() != nil {
				return o.done(attempt, newContextError(ctx, attempt, err), false)
			}
			return o.done(attempt, err, true)
		}
	}
}

// attemptContext is the context an attempt's fn gets: the loop's ctx,
// marked for [Budget.WrapTransport] when the loop charges a Budget on the
// wire itself (its transport then deposits and withdraws nothing for the
// attempt's requests) or when the previous attempt failed transiently (a
// transport then charges its requests as retries). Unmarked, it costs
// nothing.
func attemptContext(ctx context.Context, budget *Budget, afterTransient bool) context.Context {
	own := budget
	if own != nil && !own.onWire() {
		own = nil
	}
	if own == nil && !afterTransient {
		return ctx
	}
	return markAttempt(ctx, own, afterTransient)
}

// errAttemptTimeout is the cause of an attempt's context that its own
// deadline ended (context.Cause tells it from the loop's).
var errAttemptTimeout = errors.New("retry: the attempt's own deadline (WithAttemptTimeout) passed")

// timedAttempt is fn.call under the attempt's own deadline, which
// [WithAttemptTimeout] set: an attempt that ran out of its own time
// (timedOut) may be followed by another whatever the predicate says.
func (o *options) timedAttempt(ctx context.Context, fn attemptFunc, retriable func(error) bool) (retry, timedOut bool, err error) {
	attemptCtx, cancel := context.WithTimeoutCause(ctx, o.attemptTimeout, errAttemptTimeout)
	defer cancel() // also when fn panics
	retry, err = fn.call(attemptCtx, retriable)
	timedOut = attemptTimedOut(ctx, attemptCtx, err)
	return retry || timedOut, timedOut, err
}

// probe makes the attempt as the budget's probe: if fn panics, the
// probe's slot is freed as a failed probe's, and the panic goes on.
func (o *options) probe(budget *Budget, id uint64, ctx context.Context, fn attemptFunc, retriable func(error) bool) (retry, timedOut bool, err error) {
	ended := false
	defer func() {
		if !ended {
			budget.probePanicked(id)
		}
	}()
	if o.attemptTimeout > 0 {
		retry, timedOut, err = o.timedAttempt(ctx, fn, retriable)
	} else {
		retry, err = fn.call(ctx, retriable)
	}
	ended = true
	return retry, timedOut, err
}

// attemptTimedOut reports whether an attempt that failed with err ran out
// of its own time: err is a timeout, the attempt's own deadline ended its
// context, and the loop's context lives on. A request that a Budget's
// hold kept waiting until that deadline was never sent: its error is the
// Budget's, which ends the loop at once.
func attemptTimedOut(loopCtx, attemptCtx context.Context, err error) bool {
	// The attempt's cause is read first: a loop's context that ends passes
	// its own cause to the attempt's only after it is done itself.
	if err == nil || context.Cause(attemptCtx) != errAttemptTimeout || loopCtx.Err() != nil ||
		errors.Is(err, ErrBudgetExhausted) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// contextEnds returns the error that ends the loop instead of a wait of d
// after attempt failed with last: ctx's own when ctx is done, or, for the
// default sleeper, one matching DeadlineExceeded when the wait would end
// after ctx's deadline, since the loop would then fail anyway.
func (o *options) contextEnds(ctx context.Context, attempt int, last error, d time.Duration) error {
	if ctx.Err() != nil {
		return newContextError(ctx, attempt, last)
	}
	if o.sleeper == nil {
		// A deadline just passed can still be unknown to ctx; d of 0 then
		// outlasts it too.
		if deadline, ok := ctx.Deadline(); ok && d > time.Until(deadline) {
			return newDeadlineError(attempt, last, d)
		}
	}
	return nil
}
