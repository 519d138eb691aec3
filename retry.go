package retry

import (
	"context"
	"time"

	"k8s.io/utils/clock"
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

// HotObjectBackoff is a backoff for one object that many writers update at
// once: up to 30 attempts, each retry after a uniformly jittered 200ms to
// 400ms, the same at every attempt (12s of waits at most). It was chosen by
// the contention study on a real kube-apiserver (make study; see the
// README's Contention section): at 64 writers on one ConfigMap it got every
// update through with fewer requests per update and a lower p99 than
// client-go's DefaultBackoff with Steps raised to 7 and than the x1.2
// exponential (Steps 30, 10ms, Jitter 1.0, Cap 2s) it replaces. A flat wait
// keeps every waiting writer at the same rate, where a growing one lets a
// writer that just succeeded take the object from those that have waited
// longest. Each Conflict costs at least 200ms, so for an object with few
// writers [DefaultRetry] is faster.
var HotObjectBackoff = Backoff{Steps: 30, Duration: 200 * time.Millisecond, Factor: 1, Jitter: 1.0}

// DefaultRetryAfterBackoff is a backoff for [OnRetryAfterError]: 1 attempt
// and up to 10 retries, as client-go's rest.Request makes by default, each
// wait at least 1s and longer when the server asks for longer. The 1s floor
// keeps a server that suggests a delay of 0 (a 500 ServerTimeout may) from
// turning the loop into a hot loop.
var DefaultRetryAfterBackoff = Backoff{Steps: 11, Duration: time.Second, Factor: 1.0}

// Sleeper waits. A loop given one through [WithSleeper] calls Sleep once per
// wait, a zero wait included. k8s.io/utils/clock.RealClock and
// k8s.io/utils/clock/testing.FakeClock satisfy it, so a test passes a
// FakeClock through [WithSleeper] and reads the time slept from it.
type Sleeper interface {
	Sleep(d time.Duration)
}

var _ Sleeper = clock.RealClock{}

// Option configures one call of a loop. Options are applied in order, so a
// later one of the same kind wins. The zero Option does nothing. Options
// are plain values: building and passing them does not allocate (a closure
// given to [WithOnRetry], [WithRand] or [WithRetryAfter] that captures
// variables costs the caller one allocation, as any such closure does).
type Option struct {
	kind       optionKind
	sleeper    Sleeper
	rand       func() float64
	onRetry    func(RetryEvent)
	onDone     func(DoneEvent)
	retryAfter func(error) (time.Duration, bool)
	budget     *Budget
	d          time.Duration
}

type optionKind uint8

const (
	optNone optionKind = iota
	optSleeper
	optRand
	optMaxDelay
	optContinueAtCap
	optOnRetry
	optRetryAfter
	optOnDone
	optFullJitter
	optBudget
)

// WithSleeper makes every wait of the loop a call to s.Sleep, exactly once
// per wait, also for a zero wait. A custom Sleeper is not interrupted when a
// context is done; the context variants check ctx when it returns. nil,
// k8s.io/utils/clock.RealClock and a *RealClock mean the default: real
// time, cut short when ctx is done.
func WithSleeper(s Sleeper) Option {
	switch s.(type) {
	case clock.RealClock, *clock.RealClock:
		s = nil // RealClock.Sleep cannot be cut short; the default can
	}
	return Option{kind: optSleeper, sleeper: s}
}

// WithRand sets the loop's source of jitter, a function returning values in
// [0,1); a value outside that range, or NaN, is clamped into it. nil means
// the default, math/rand/v2's global source. f is called from the loop's
// goroutine only.
func WithRand(f func() float64) Option {
	return Option{kind: optRand, rand: f}
}

// WithMaxDelay bounds each wait at d. It applies last, after jitter and a
// server's Retry-After, so it bounds every wait whatever the server says.
// d of 0 or below means no bound.
func WithMaxDelay(d time.Duration) Option {
	return Option{kind: optMaxDelay, d: d}
}

// WithContinueAtCap keeps a loop attempting after the backoff reaches its
// Cap, waiting [Backoff.Step] each time (the Cap plus jitter), until Steps
// attempts in all have been made. Without it, reaching the Cap ends the loop
// after that wait, as apimachinery's ExponentialBackoff does
// (kubernetes/kubernetes#131122).
func WithContinueAtCap() Option {
	return Option{kind: optContinueAtCap}
}

// WithOnRetry calls f once before each wait that the loop sleeps, from the
// loop's goroutine. It is not called when the loop returns without waiting:
// on success, on a non-retriable error, after the last allowed attempt,
// when a context ends the loop first, or when a [Budget] refuses the retry.
func WithOnRetry(f func(RetryEvent)) Option {
	return Option{kind: optOnRetry, onRetry: f}
}

// WithRetryAfter makes f the loop's source of a server's delay: after a
// retriable error err, when d, ok := f(err) is ok, the wait is the longer
// of [Backoff.Step] and d (a negative d counts as 0), then bounded by
// [WithMaxDelay]. Step is taken either way, so the backoff advances even
// when the server's delay wins, as client-go's rest.Request does.
//
// [OnRetryAfterError] is [OnError] with WithRetryAfter([RetryAfter]) preset,
// which a later WithRetryAfter replaces. nil f means the loop's default:
// [RetryAfter] for the OnRetryAfterError loops, no server delay for the
// others. To honour a Retry-After header of a plain HTTP call, return an
// error that carries the response and read it with [ResponseRetryAfter].
// f is called from the loop's goroutine, once per retriable error that a
// wait follows.
func WithRetryAfter(f func(error) (time.Duration, bool)) Option {
	return Option{kind: optRetryAfter, retryAfter: f}
}

// WithOnDone calls f exactly once when the loop returns, from the loop's
// goroutine, with the attempts made, the error returned and whether the
// loop ran out of attempts: on success, on a non-retriable error, on
// exhaustion, when a context ends the loop (before the first attempt too,
// with Attempts 0) and when a [Budget] refuses a retry. It is not called
// when the loop returns an error for an invalid argument, before anything
// ran, nor when a panic in fn or a hook leaves the loop. With [WithOnRetry]
// it counts retries, give-ups and refusals without a wrapper around every
// call.
func WithOnDone(f func(DoneEvent)) Option {
	return Option{kind: optOnDone, onDone: f}
}

// WithFullJitter makes each wait a uniform random fraction of the wait
// [Backoff.Step] returns: rand*Step(), rand from [WithRand]'s source, the
// "full jitter" of AWS's study "Exponential Backoff And Jitter". With
// Backoff.Jitter above 0, Step's own jitter is drawn first, then the
// fraction. A server's delay ([WithRetryAfter]) and [WithMaxDelay] apply
// after it, as to any wait. Full jitter spreads writers that failed
// together over the whole wait instead of its top part, at the cost of a
// shorter mean wait (half of Step's).
func WithFullJitter() Option {
	return Option{kind: optFullJitter}
}

// WithBudget makes the loop draw its retries from b, a budget shared with
// the other loops that talk to the same server: the loop deposits its first
// attempt in b, and withdraws each retry from b before the wait that leads
// to it. When b has no retry left, the loop returns at once, without
// waiting and without calling [WithOnRetry]'s f, an error that matches
// [ErrBudgetExhausted] and wraps the last attempt's error (errors.Is both).
// A nil or invalid b makes the loop return an error at once, calling
// nothing; see [Budget.Validate].
func WithBudget(b *Budget) Option {
	return Option{kind: optBudget, budget: b}
}

// DoneEvent describes a loop that returned; see [WithOnDone].
type DoneEvent struct {
	// Attempts is the number of attempts made: calls of fn, or of the
	// read-change-write of [UpdateOnConflict] and [CreateOrUpdate]. It is 0
	// when a context was done before the first attempt.
	Attempts int
	// Err is the error the loop returns, nil on success.
	Err error
	// Exhausted is true when the loop returned because no attempt was left:
	// Steps attempts were made, or the step that reached [Backoff].Cap was
	// waited out. It is false when fn succeeded, when the predicate rejected
	// an error, and when a context or a [Budget] ended the loop.
	Exhausted bool
}

// RetryEvent describes a failed attempt and the wait before the next one; see
// [WithOnRetry].
type RetryEvent struct {
	// Attempt is the 1-based number of the attempt that just failed.
	Attempt int
	// Err is the error that attempt returned.
	Err error
	// Delay is the wait about to be slept, after jitter, Retry-After and
	// [WithMaxDelay].
	Delay time.Duration
	// RetryAfter is the delay the server suggested, 0 if none or negative
	// (only a loop with a server-delay source reads it: [OnRetryAfterError],
	// or any loop given [WithRetryAfter]).
	RetryAfter time.Duration
	// Final is true for the wait after the step that reached [Backoff].Cap:
	// the loop returns when it ends, with no further attempt. It is never
	// true under [WithContinueAtCap].
	Final bool
}

type options struct {
	sleeper       Sleeper
	rand          func() float64
	onRetry       func(RetryEvent)
	onDone        func(DoneEvent)
	retryAfter    func(error) (time.Duration, bool)
	budget        *Budget
	maxDelay      time.Duration
	continueAtCap bool
	fullJitter    bool
	budgetSet     bool // WithBudget was given, maybe with nil
}

// apply sets the options in order; WithRetryAfter(nil) restores
// defaultRetryAfter, the loop's own source.
func (o *options) apply(opts []Option, defaultRetryAfter func(error) (time.Duration, bool)) {
	for _, opt := range opts {
		switch opt.kind {
		case optSleeper:
			o.sleeper = opt.sleeper
		case optRand:
			o.rand = opt.rand
		case optMaxDelay:
			o.maxDelay = opt.d
		case optContinueAtCap:
			o.continueAtCap = true
		case optOnRetry:
			o.onRetry = opt.onRetry
		case optRetryAfter:
			o.retryAfter = opt.retryAfter
			if o.retryAfter == nil {
				o.retryAfter = defaultRetryAfter
			}
		case optOnDone:
			o.onDone = opt.onDone
		case optFullJitter:
			o.fullJitter = true
		case optBudget:
			o.budget, o.budgetSet = opt.budget, true
		}
	}
}

// done reports the loop's end to the WithOnDone hook and returns err.
func (o *options) done(attempts int, err error, exhausted bool) error {
	if o.onDone != nil {
		o.onDone(DoneEvent{Attempts: attempts, Err: err, Exhausted: exhausted})
	}
	return err
}

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
	return run(loopContext{}, backoff, retriable, attemptFunc{plain: fn}, nil, opts)
}

// RetryOnConflict is [OnError] for an update that may meet a 409 Conflict:
// it retries an error that apierrors.IsConflict matches, unless it is an
// apply conflict ([IsApplyConflict]), which no retry of the same apply can
// resolve and which is returned at once. fn should get the object afresh,
// change it, update it and return the update's error as it is (a wrapped
// error is matched too). It mirrors client-go's retry.RetryOnConflict,
// which retries an apply conflict Steps times in vain.
func RetryOnConflict(backoff Backoff, fn func() error, opts ...Option) error {
	return run(loopContext{}, backoff, isRetriableConflict, attemptFunc{plain: fn}, nil, opts)
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
	return run(loopContext{}, backoff, retriable, attemptFunc{plain: fn}, RetryAfter, opts)
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
	return run(newLoopContext(ctx), backoff, retriable, attemptFunc{withCtx: fn}, nil, opts)
}

// RetryOnConflictWithContext is [RetryOnConflict] under a context, as
// described at [OnErrorWithContext].
func RetryOnConflictWithContext(ctx context.Context, backoff Backoff, fn func(context.Context) error, opts ...Option) error {
	return run(newLoopContext(ctx), backoff, isRetriableConflict, attemptFunc{withCtx: fn}, nil, opts)
}

// OnRetryAfterErrorWithContext is [OnRetryAfterError] under a context, as
// described at [OnErrorWithContext].
func OnRetryAfterErrorWithContext(ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) error, opts ...Option) error {
	return run(newLoopContext(ctx), backoff, retriable, attemptFunc{withCtx: fn}, RetryAfter, opts)
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
	err := run(newLoopContext(ctx), backoff, retriable, attemptFunc{withCtx: func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	}}, nil, opts)
	if err != nil {
		return zero, err
	}
	return v, nil
}

// attemptFunc is fn in either shape. The plain loops pass theirs as it is,
// which saves the call through an adapter on every attempt.
type attemptFunc struct {
	plain   func() error
	withCtx func(context.Context) error
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

// run is the one loop behind every exported loop. retryAfter is the loop's
// default server-delay source (nil for none), which [WithRetryAfter]
// replaces.
func run(c loopContext, b Backoff, retriable func(error) bool, fn attemptFunc, retryAfter func(error) (time.Duration, bool), opts []Option) error {
	switch {
	case fn.plain == nil && fn.withCtx == nil:
		return errNilFn
	case fn.withCtx != nil && c.ctx == nil:
		return errNilContext
	case retriable == nil:
		return errNilRetriable
	}
	if !b.valid() {
		return b.invalid()
	}
	o := options{retryAfter: retryAfter}
	if len(opts) > 0 {
		o.apply(opts, retryAfter)
		if o.budgetSet {
			if err := o.budget.Validate(); err != nil {
				return err
			}
		}
	}

	steps := b.Steps // b.Steps counts down as b steps; attempts count up to this
	var lastErr error
	for attempt := 1; ; attempt++ {
		if c.ended() {
			return o.done(attempt-1, newContextError(c.ctx, attempt-1, lastErr), false)
		}
		if attempt == 1 && o.budget != nil {
			o.budget.deposit()
		}
		var err error
		if fn.plain != nil {
			err = fn.plain()
		} else {
			err = fn.withCtx(c.ctx)
		}
		if err == nil || !retriable(err) {
			return o.done(attempt, err, false)
		}
		lastErr = err
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
		if !final && o.budget != nil && !o.budget.withdraw() {
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

// sleep waits d through the loop's sleeper. The default sleeper returns
// early when done is closed; the caller checks ctx afterwards either way.
func (o *options) sleep(done <-chan struct{}, d time.Duration) {
	switch {
	case o.sleeper != nil:
		o.sleeper.Sleep(d)
	case d > 0:
		sleepUntilDone(done, d)
	}
}

// sleepUntilDone is the default sleeper: real time, cut short when done is
// closed (a nil done never is).
func sleepUntilDone(done <-chan struct{}, d time.Duration) {
	if done == nil {
		clock.RealClock{}.Sleep(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
