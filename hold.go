package retry

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// holdFailures is how many first attempts must fail transiently, with no
// success among them, within 10*Hold to start a hold.
const holdFailures = 3

// holdState is a Budget's hold, guarded by its mu. See [Budget].Hold.
type holdState struct {
	on       bool
	released chan struct{} // closed when the hold ends
	interval time.Duration // the current probe interval
	// next is when the next probe may go, while no probe is in flight.
	next time.Time
	// probe is the id of the probe in flight (0: none), sent at sent; it
	// counts as failed when it has no answer at due.
	probe     uint64
	sent, due time.Time
	lastID    uint64
	// failed holds the times of the transient first-attempt failures since
	// the last success (failures of them, the newest at failed[(failures-1)%3]).
	failed   [holdFailures]time.Time
	failures int
}

// holdClock is the clock of the hold's timers: the budget's Clock when it
// can make timers, else real time.
func (b *Budget) holdClock() clock.Clock {
	if c, ok := b.Clock.(clock.Clock); ok {
		return c
	}
	return clock.RealClock{}
}

// maxInterval is the longest probe interval: 10*Hold or 1s, whichever is
// less, never below Hold.
func (b *Budget) maxInterval() time.Duration {
	limit := time.Second
	if b.Hold < limit/10 {
		limit = 10 * b.Hold
	}
	return max(limit, b.Hold)
}

// failureSpan is 10*Hold, saturated.
func (b *Budget) failureSpan() time.Duration {
	if b.Hold > maxDuration/10 {
		return maxDuration
	}
	return 10 * b.Hold
}

// admit lets a first attempt go, and deposits it when it goes. Outside a
// hold it goes at once. During a hold it waits until the hold ends, until
// it may go as the probe (then it returns the probe's id, for observe), or
// until ctx ends (done is ctx.Done(), read once). A nil ctx (a loop
// without one) cannot wait: it is refused at once.
func (b *Budget) admit(ctx context.Context, done <-chan struct{}) (probe uint64, err error) {
	if b.Hold <= 0 || !b.holding.Load() {
		b.deposit()
		return 0, nil
	}
	clk := b.holdClock()
	waited := false
	for {
		now, budgetNow := clk.Now(), b.now()
		b.mu.Lock()
		h := &b.hold
		switch {
		case !h.on:
			b.depositLocked(budgetNow)
			b.mu.Unlock()
			return 0, nil
		case ctx == nil:
			b.stats.Refused++
			b.mu.Unlock()
			return 0, errHeldNoContext
		}
		if id := b.letProbe(now); id != 0 {
			b.stats.Probes++
			b.depositLocked(budgetNow)
			b.mu.Unlock()
			return id, nil
		}
		if !waited {
			waited = true
			b.stats.Held++
		}
		wake, released := h.next, h.released
		if h.probe != 0 {
			wake = h.due
		}
		b.mu.Unlock()

		t := clk.NewTimer(wake.Sub(now))
		select {
		case <-released:
		case <-t.C():
		case <-done:
			t.Stop()
			return 0, newHeldError(ctx)
		}
		t.Stop()
	}
}

// letProbe returns the id of a new probe when one may go at now, else 0.
// A probe in flight past its due time counts as failed, and the next goes
// at once.
func (b *Budget) letProbe(now time.Time) uint64 {
	h := &b.hold
	if h.probe != 0 {
		if now.Before(h.due) {
			return 0
		}
		b.probeFailed(h.probe)
		h.next = now
	}
	if now.Before(h.next) {
		return 0
	}
	h.lastID++
	h.probe, h.sent, h.due = h.lastID, now, now.Add(h.interval)
	return h.probe
}

// probeFailed frees the slot of probe id, unless another probe took it
// since, and doubles the interval; the next probe may go an interval
// after id was sent. Called with mu held.
func (b *Budget) probeFailed(id uint64) {
	b.probeEnded(id, true)
}

// probeEnded frees the slot of probe id, unless another probe took it
// since; the next probe may go an interval after id was sent, the interval
// doubled when the probe failed. A probe that its own context or a Budget
// ended said nothing about the server, and leaves the interval as it is.
// Called with mu held.
func (b *Budget) probeEnded(id uint64, failed bool) {
	h := &b.hold
	if !h.on || h.probe != id {
		return
	}
	h.probe = 0
	if failed {
		if limit := b.maxInterval(); h.interval > limit/2 {
			h.interval = limit
		} else {
			h.interval *= 2
		}
	}
	h.next = h.sent.Add(h.interval)
}

// startHold starts a hold now, unless one is on.
func (b *Budget) startHold() {
	now := b.holdClock().Now()
	b.mu.Lock()
	b.startHoldLocked(now)
	b.mu.Unlock()
}

func (b *Budget) startHoldLocked(now time.Time) {
	h := &b.hold
	if h.on {
		return
	}
	if !budgetsRefused.Load() {
		budgetsRefused.Store(true) // the hold will keep calls from going
	}
	h.on, h.released = true, make(chan struct{})
	h.interval, h.next, h.probe = b.Hold, now.Add(b.Hold), 0
	b.holding.Store(true)
}

// observe takes the outcome of an attempt the budget charged: a first
// attempt (first), the probe id (probe > 0), or a retry. A success ends
// the hold; a probe that did not succeed frees its slot; a transient
// failure of a first attempt may start a hold.
func (b *Budget) observe(first bool, probe uint64, out outcome) {
	if b.Hold <= 0 {
		return
	}
	switch {
	case out == answered:
		if !b.holding.Load() && !b.failing.Load() {
			return
		}
		b.mu.Lock()
		if h := &b.hold; h.on {
			h.on, h.probe = false, 0
			close(h.released)
			b.holding.Store(false)
		}
		b.hold.failures = 0
		b.failing.Store(false)
		b.mu.Unlock()
	case probe != 0:
		b.mu.Lock()
		b.probeEnded(probe, out == failedTransiently)
		b.mu.Unlock()
	case first && out == failedTransiently && !b.holding.Load():
		now := b.holdClock().Now()
		b.mu.Lock()
		h := &b.hold
		h.failed[h.failures%holdFailures] = now
		h.failures++
		b.failing.Store(true)
		// failed[failures%3] is now the oldest of the last three.
		if h.failures >= holdFailures && now.Sub(h.failed[h.failures%holdFailures]) < b.failureSpan() {
			b.startHoldLocked(now)
		}
		b.mu.Unlock()
	}
}

// guardProbe frees probe id's slot when the call it guards panics (ended
// is still false); the panic goes on.
func (b *Budget) guardProbe(id uint64, ended *bool) {
	if !*ended {
		b.mu.Lock()
		b.probeFailed(id)
		b.mu.Unlock()
	}
}

// probeAttempt makes a loop's first attempt as the probe id.
func (b *Budget) probeAttempt(id uint64, o *options, fn attemptFunc, ctx context.Context, retriable func(error) bool) (retry, timedOut bool, err error) {
	ended := false
	defer b.guardProbe(id, &ended)
	retry, timedOut, err = o.attempt(ctx, fn, retriable)
	ended = true
	return retry, timedOut, err
}

// errHeldNoContext is the error of a loop without a context whose first
// attempt a hold refused.
var errHeldNoContext error = &heldError{}

// heldError is returned for a first attempt that a hold kept from going:
// at once for a loop without a context, or when ctx ended the wait. It
// matches ErrBudgetExhausted, and ctx's error and cause.
type heldError struct {
	ctxErr error // nil: refused at once
	cause  error // context.Cause when it differs from ctxErr
}

func newHeldError(ctx context.Context) error {
	e := &heldError{ctxErr: ctx.Err()}
	if e.ctxErr == nil { // a Context of the caller's own whose Done closed before its Err was set
		e.ctxErr = context.Canceled
	}
	if cause := context.Cause(ctx); cause != e.ctxErr {
		e.cause = cause
	}
	return e
}

func (e *heldError) Error() string {
	if e.ctxErr == nil {
		return ErrBudgetExhausted.Error() + ": the budget holds new calls while the server fails, and a call without a context cannot wait"
	}
	msg := ErrBudgetExhausted.Error() + ": the call waited for the budget's hold, until " + e.ctxErr.Error()
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
