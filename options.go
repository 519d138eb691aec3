package retry

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

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
	contention *Contention
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
	optAttemptTimeout
	optContention
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
// f is called from the loop's goroutine, once for each retriable error
// after which the loop may wait (another attempt is left, or the step
// reached Cap, whose wait is waited out before the loop returns, see
// [Backoff]), before the loop checks ctx and its [Budget]: so also when
// ctx, a wait that would outlast ctx's deadline, or a budget refusal then
// ends the loop without a wait. It is not called after the last of Steps
// attempts.
func WithRetryAfter(f func(error) (time.Duration, bool)) Option {
	return Option{kind: optRetryAfter, retryAfter: f}
}

// WithOnDone calls f exactly once when the loop returns, from the loop's
// goroutine, with the attempts made, the error returned and whether the
// loop ran out of attempts: on success, on a non-retriable error, on
// exhaustion, when a context ends the loop (before the first attempt too,
// with Attempts 0) and when a [Budget] refuses a retry, or holds or refuses
// the first attempt (Attempts 0). It is not called when the loop returns
// an error for an invalid argument, before anything ran, nor when a panic
// in fn or a hook leaves the loop. With [WithOnRetry]
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
// With a Hold, b holds the loop's first attempt during a hold of its
// loops (see [Budget].Hold); once b's WrapTransport has been called, the
// loop charges its attempts but holds nothing itself, and its requests are
// held and refused per scope on the wire, where the transport charges them
// nothing more. A nil or invalid b makes the loop return an error at once,
// calling nothing; see [Budget.Validate] and docs/budget.md.
func WithBudget(b *Budget) Option {
	return Option{kind: optBudget, budget: b}
}

// WithAttemptTimeout gives each attempt a deadline of its own, d after it
// starts: fn is called with a context derived from the loop's that ends
// then (for [UpdateOnConflict], [CreateOrUpdate], [PatchOnConflict] and
// their typed forms, one read-change-write, its read and its write
// together). An attempt that ran out of its own time, one whose error
// matches context.DeadlineExceeded or is a net.Error whose Timeout() is
// true after its own deadline passed, is retried whatever the loop's
// predicate says, while the loop's own context lives: [WithOnRetry] sees
// it, a [Budget] charges it and the wait follows the Backoff as for any
// retry. Any other error is judged as before, and the loop's own context
// ends the loop as before. An attempt whose request a Budget's hold kept
// waiting on the wire ([Budget.WrapTransport]) until its deadline sent
// nothing: its error matches [ErrBudgetExhausted] and ends the loop at
// once, as any Budget's refusal does. On exhaustion the last attempt's
// error is returned.
//
// This bounds a request that a stalled server never answers, and retries
// it. client-go's rest.Config.Timeout bounds it but cannot make it retried
// reliably: it often expires as context.DeadlineExceeded itself, which no
// predicate can tell from the caller's own deadline (see [IsTransient]).
//
// d of 0 means no attempt timeout. A negative d makes the loop return an
// error at once, calling nothing, and so does a positive d given to a loop
// whose fn takes no context ([OnError], [RetryOnConflict],
// [OnRetryAfterError]), which could not stop an attempt.
func WithAttemptTimeout(d time.Duration) Option {
	return Option{kind: optAttemptTimeout, d: d}
}

// WithContention makes the loop learn, in c, from each of its attempts
// how contended the object is, and start its waits from what c learned
// from the earlier calls given it (see [Contention]): a loop with
// [HotObjectBackoff] then waits about as long as the number of writers
// needs, 2 or 128. Steps still bounds the attempts, and every other
// option applies to the waits as ever. A nil c means no learning: the
// loop waits as its Backoff says. Passing it allocates nothing.
func WithContention(c *Contention) Option {
	return Option{kind: optContention, contention: c}
}

type options struct {
	sleeper        Sleeper
	rand           func() float64
	onRetry        func(RetryEvent)
	onDone         func(DoneEvent)
	retryAfter     func(error) (time.Duration, bool)
	budget         *Budget
	contention     *Contention
	maxDelay       time.Duration
	attemptTimeout time.Duration
	continueAtCap  bool
	fullJitter     bool
	budgetSet      bool // WithBudget was given, maybe with nil
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
		case optAttemptTimeout:
			o.attemptTimeout = opt.d
		case optContention:
			o.contention = opt.contention
		}
	}
}

// validate checks the options that can be wrong; plain tells a loop whose
// fn takes no context.
func (o *options) validate(plain bool) error {
	if o.budgetSet {
		if err := o.budget.Validate(); err != nil {
			return err
		}
	}
	switch {
	case o.attemptTimeout < 0:
		return fmt.Errorf("retry: WithAttemptTimeout(%v): the timeout must not be negative (0 means none)", o.attemptTimeout)
	case o.attemptTimeout > 0 && plain:
		return fmt.Errorf("retry: WithAttemptTimeout(%v) needs a loop whose fn takes a context: OnError, RetryOnConflict and OnRetryAfterError cannot end an attempt (use their WithContext variants)", o.attemptTimeout)
	}
	return nil
}
