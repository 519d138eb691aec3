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

// loopContext is the loop's ctx with its Done channel read once. A nil
// channel means ctx can never be done (the plain loops have no ctx at all,
// and context.Background is never done), so every check is skipped.
type loopContext struct {
	ctx  context.Context // nil for the plain loops, or when the caller passed nil
	done <-chan struct{}
}

func newLoopContext(ctx context.Context) loopContext {
	if ctx == nil {
		return loopContext{}
	}
	return loopContext{ctx: ctx, done: ctx.Done()}
}

// ended reports whether ctx is done; a ctx that can never be done is not
// asked.
func (c loopContext) ended() bool {
	return c.done != nil && c.ctx.Err() != nil
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

// prepare readies an attempt of a loop that has a Budget or a context:
// the Budget admits the first attempt (it may wait during a hold, or go
// as the probe), and ctx becomes the attempt's context.
func (o *options) prepare(c loopContext, attempt int, afterTransient bool) (probe uint64, ctx context.Context, err error) {
	if attempt == 1 && o.budget != nil {
		if probe, err = o.budget.admit(c.ctx, c.done); err != nil {
			return 0, nil, err
		}
	}
	if c.ctx != nil {
		ctx = o.attemptContext(c.ctx, afterTransient)
	}
	return probe, ctx, nil
}

// outcome is what an attempt's error err says, as far as the loop needs
// it, and the Budget observes it. A Budget observes every attempt; a
// context loop marks the next attempt's context after a transient
// failure, for the transports of Budgets on the wire; any loop returns at
// once an error a Budget refused, which cannot exist before some Budget
// refused something. So a process that uses no Budget pays nothing for
// them on a failed attempt.
func (o *options) outcome(c loopContext, attempt int, probe uint64, err error, retry, timedOut bool) outcome {
	out := answered
	switch {
	case err == nil || !retry && o.budget == nil:
	case timedOut: // an attempt that ran out of its own time failed transiently
		out = failedTransiently
	case o.budget != nil || c.ctx != nil && budgetsOnWire.Load():
		out = judge(err)
	case budgetsRefused.Load() && inTree(err, ErrBudgetExhausted):
		out = budgetRefused
	}
	if o.budget != nil {
		o.budget.observe(attempt == 1, probe, out)
	}
	return out
}

// attemptContext is the context an attempt's fn gets: the loop's ctx,
// marked for [Budget.WrapTransport] when the loop charges a Budget on the
// wire itself (its transport then charges nothing for the attempt's
// requests) or when the previous attempt failed transiently (a transport
// then charges its requests as retries). Unmarked, it costs nothing.
func (o *options) attemptContext(ctx context.Context, afterTransient bool) context.Context {
	var own *Budget
	if o.budget != nil && o.budget.resends.Load() != nil {
		own = o.budget
	}
	if own == nil && !afterTransient {
		return ctx
	}
	return markAttempt(ctx, own, afterTransient)
}

// run is the one loop behind every exported loop. retriable judges fn's
// errors (nil for a write attempt, which judges its own). retryAfter is the loop's
// default server-delay source (nil for none), which [WithRetryAfter]
// replaces.
func run(c loopContext, b Backoff, retriable func(error) bool, fn attemptFunc, retryAfter func(error) (time.Duration, bool), opts []Option) error {
	switch {
	case fn.plain == nil && fn.withCtx == nil && fn.write == nil:
		return errNilFn
	case fn.plain == nil && c.ctx == nil:
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

	steps := b.Steps // b.Steps counts down as b steps; attempts count up to this
	var lastErr error
	afterTransient := false // the previous attempt failed transiently
	for attempt := 1; ; attempt++ {
		if c.ended() {
			return o.done(attempt-1, newContextError(c.ctx, attempt-1, lastErr), false)
		}
		ctx := c.ctx
		var probe uint64 // the first attempt's, when a hold lets it go as the probe
		if o.budget != nil || ctx != nil {
			var err error
			if probe, ctx, err = o.prepare(c, attempt, afterTransient); err != nil {
				return o.done(0, err, false)
			}
		}
		var err error
		var retry, timedOut bool
		switch { // fn.call written out: the call costs the hot path
		case probe != 0:
			retry, timedOut, err = o.budget.probeAttempt(probe, &o, fn, ctx, retriable)
		case o.attemptTimeout > 0:
			retry, timedOut, err = o.attempt(ctx, fn, retriable)
		case fn.plain != nil:
			err = fn.plain()
			retry = err != nil && retriable(err)
		case fn.withCtx != nil:
			err = fn.withCtx(ctx)
			retry = err != nil && retriable(err)
		default:
			retry, err = fn.write(ctx)
		}
		out := answered
		if o.budget != nil || err != nil && (ctx != nil || budgetsRefused.Load()) {
			out = o.outcome(c, attempt, probe, err, retry, timedOut)
		}
		if !retry || out == budgetRefused {
			return o.done(attempt, err, false)
		}
		lastErr = err
		afterTransient = out == failedTransiently
		if attempt >= steps {
			return o.done(attempt, err, true)
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

		if c.done != nil {
			if cerr := o.contextEnds(c.ctx, attempt, err, d); cerr != nil {
				return o.done(attempt, cerr, false)
			}
		}
		if !final && o.budget != nil && !o.budget.withdraw(afterTransient) {
			return o.done(attempt, &budgetError{attempts: attempt, last: err}, false)
		}
		if o.onRetry != nil {
			o.onRetry(RetryEvent{Attempt: attempt, Err: err, Delay: d, RetryAfter: serverDelay, Final: final})
		}
		o.sleep(c.done, d)
		if final {
			if c.ended() {
				return o.done(attempt, newContextError(c.ctx, attempt, err), false)
			}
			return o.done(attempt, err, true)
		}
	}
}

// errAttemptTimeout is the cause of an attempt's context that its own
// deadline ended (context.Cause tells it from the loop's).
var errAttemptTimeout = errors.New("retry: the attempt's own deadline (WithAttemptTimeout) passed")

// attempt is fn.call, under the attempt's own deadline when
// [WithAttemptTimeout] set one: an attempt that ran out of its own time
// (timedOut) may be followed by another whatever the predicate says.
func (o *options) attempt(ctx context.Context, fn attemptFunc, retriable func(error) bool) (retry, timedOut bool, err error) {
	if o.attemptTimeout <= 0 {
		retry, err = fn.call(ctx, retriable)
		return retry, false, err
	}
	attemptCtx, cancel := context.WithTimeoutCause(ctx, o.attemptTimeout, errAttemptTimeout)
	defer cancel() // also when fn panics
	retry, err = fn.call(attemptCtx, retriable)
	timedOut = attemptTimedOut(ctx, attemptCtx, err)
	return retry || timedOut, timedOut, err
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
		inTree(err, ErrBudgetExhausted) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// contextEnds returns the error that ends the loop instead of a wait of d
// after attempt failed with last: ctx's own when ctx is done, or, for the
// default sleeper, one matching DeadlineExceeded when the wait would end
// after ctx's deadline, since the loop would then fail anyway. It is kept
// apart from run so that the plain loops pay nothing for it.
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
