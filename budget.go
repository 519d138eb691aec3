package retry

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Budget bounds the retries of every loop that shares it ([WithBudget])
// and of every request through its [Budget.WrapTransport], and holds new
// calls while what they call fails: the loops of a process together add at
// most a fraction of their first attempts as retries, plus a small floor,
// instead of each multiplying its own load by its Steps. It is the retry
// budget of Finagle and Envoy, and the retry throttling of gRPC. Use one
// Budget per API server a process talks to: [NewBudget] gives one made for
// a controller, put on the wire with cfg.Wrap(budget.WrapTransport).
//
// Each loop call deposits its first attempt, and withdraws a retry before
// each wait that leads to another attempt; a withdrawal is granted only
// while the retries withdrawn during the last Window, this one included,
// stay within
//
//	floor(MinPerSecond*Window.Seconds() + Ratio*(first attempts deposited during the last Window))
//
// A refused retry ends the loop at once, with an error matching
// [ErrBudgetExhausted]. Memory does not grow with the request rate, the
// number of URLs or the number of scopes.
//
// The zero Budget is invalid (its Window is 0; see [Budget.Validate]). A
// Budget is safe for concurrent use by any number of loops and transports;
// its fields must not change, and it must not be copied, after its first
// use. docs/budget.md explains the window, the holds and their numbers.
type Budget struct {
	// Ratio is the number of retries allowed per first attempt made during
	// the last Window: 0.2 lets retries add at most 20% to the load.
	Ratio float64
	// MinPerSecond is the number of retries allowed per second of Window
	// whatever Ratio allows, so that a process making few calls can still
	// retry. It adds up across processes: N processes, each with its own
	// Budget, may retry N times as often while the server fails.
	MinPerSecond float64
	// Window is how long a first attempt or a retry counts.
	Window time.Duration
	// Clock reads the time; nil means real time. The loops' waits go
	// through their Sleeper, not this Clock. When Clock also implements
	// k8s.io/utils/clock.Clock (a FakeClock does), the hold's timers run
	// on it; otherwise on real time.
	Clock clock.PassiveClock
	// Hold, when above 0, makes new calls wait while what they call fails,
	// so that a caller that calls again after an error adds no load either.
	// Zero means no hold; below 0 is invalid.
	//
	// A hold is kept per scope: on a Budget never put on the wire, one
	// scope, every loop given it; once WrapTransport has been called, on the
	// wire only, per server (scheme and host) and per resource (API group,
	// resource, and reads or writes). A scope's hold starts when the budget
	// refuses a retry that follows a transient failure of that scope, or when
	// 3 first attempts of it fail transiently within 10 x Hold with no
	// success. While it lasts, each first attempt of the scope waits, sending
	// nothing, until the hold ends or its context ends (the error then
	// matches both the context's error and [ErrBudgetExhausted]); a loop
	// whose fn takes no context is refused at once, and on the wire so is a
	// retry of a held scope. One probe at a time goes meanwhile, after a
	// wait drawn from half to all of an interval that starts at Hold and
	// doubles up to 5 x Hold or 1s, whichever is less, and never before a
	// 429's Retry-After. Any success of the scope ends its hold and lets
	// every waiting call go. Errors name the scope ("writes of
	// deployments.apps are held"); [Budget.OnHold] and [Budget.Held] show
	// the holds. See docs/budget.md.
	Hold time.Duration
	// Rand is the source of the probes' random waits, numbers in [0, 1);
	// nil means math/rand/v2's Float64. A number outside [0, 1] is taken as
	// the nearest end of it, NaN as 0. It is called with the budget's lock
	// held: it must not call the Budget. See docs/budget.md.
	Rand func() float64

	// OnHold, when set, is called once when a scope's hold starts, as a
	// reminder while it lasts, and once when it ends (a scope that a full
	// table replaces ends too). A reminder (Ended false, the Since of the
	// start delivered before it, Err the latest failure) comes with a
	// failed probe 10s after the start, then after waits doubling up to 2
	// minutes: a probe that failed by its answer or its error, not one
	// counted failed for going unanswered past its interval. It is called
	// outside the budget's locks, on the goroutine whose attempt or
	// request made the event; the calls for one scope come in order, its
	// start, its reminders, its end, and never overlap. It must return
	// quickly (it delays that goroutine) and may call [Budget.Held] and
	// [Budget.Stats]: during a start's call the scope is listed by Held,
	// during an end's it is not. An end repeats its start's Since and Err.
	// A panic in it goes to that goroutine; the budget's state stays
	// whole. Nil means no calls; nothing of it allocates while no scope is
	// held or changes. See docs/budget.md.
	OnHold func(HoldEvent)

	window retryWindow
	holds  holdTable
	// wire is set once, by the first WrapTransport, and never changes:
	// from then on the Budget holds on the wire only. It is read without a
	// lock by every loop's first attempt (a success path), which a lock of
	// its own would cost on every call; it mirrors no locked field.
	wire atomic.Pointer[resendTable]
}

// BudgetStats counts what a [Budget] did since its first use: each field
// only grows. It is for metrics (a Prometheus CounterFunc per field); see
// docs/budget.md.
type BudgetStats struct {
	FirstAttempts uint64 // first attempts deposited (probes included)
	Retries       uint64 // retries granted
	// Refused counts the retries refused, and the first attempts of the
	// loops without a context refused during a hold.
	Refused uint64
	Held    uint64 // first attempts that waited for a hold, until it or their context ended
	Probes  uint64 // first attempts sent as probes during a hold
}

// NewBudget returns a Budget for a controller talking to one API server:
// Ratio 0.1, MinPerSecond 3, Window 1s and Hold 100ms (so its probes
// wait from half to all of 0.1, 0.2, 0.4, then 0.5s each). Put it on the controller's rest.Config
// (cfg.Wrap(budget.WrapTransport)); see docs/budget.md for what these
// values do, and docs/outages.md for how they were chosen and measured.
func NewBudget() *Budget {
	return &Budget{Ratio: 0.1, MinPerSecond: 3, Window: time.Second, Hold: 100 * time.Millisecond}
}

// Stats returns the budget's counters. It is safe for concurrent use; a
// nil *Budget gives zeros.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	var s BudgetStats
	var refused uint64
	s.FirstAttempts, s.Retries, s.Refused = b.window.counts()
	s.Held, s.Probes, refused = b.holds.counts()
	s.Refused += refused
	return s
}

// Validate returns nil, or an error wrapping [ErrInvalidBudget] that names
// each invalid field and its value: Ratio and MinPerSecond must be finite
// and not negative, Window above 0, Hold not below 0. A nil *Budget is
// invalid.
func (b *Budget) Validate() error {
	if b == nil {
		return fmt.Errorf("%w: the Budget is nil", ErrInvalidBudget)
	}
	var bad []string
	if !finiteNonNegative(b.Ratio) {
		bad = append(bad, fmt.Sprintf("Ratio %v is not a finite non-negative number", b.Ratio))
	}
	if !finiteNonNegative(b.MinPerSecond) {
		bad = append(bad, fmt.Sprintf("MinPerSecond %v is not a finite non-negative number", b.MinPerSecond))
	}
	if b.Window <= 0 {
		bad = append(bad, fmt.Sprintf("Window %v is not above 0", b.Window))
	}
	if b.Hold < 0 {
		bad = append(bad, fmt.Sprintf("Hold %v is below 0", b.Hold))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidBudget, strings.Join(bad, "; "))
}

// Held returns a HoldEvent for each scope held now (Ended false), oldest
// first (by Since), or nil when none is. A hold is listed from the start
// of its [Budget].OnHold start call until its end call begins. It is safe
// for concurrent use, also from OnHold; it allocates only when a scope is
// held. A nil *Budget holds nothing. See docs/budget.md.
func (b *Budget) Held() []HoldEvent {
	if b == nil {
		return nil
	}
	return b.holds.heldEvents()
}

// The Budget's core: the loops and the wire admit, charge and observe
// through these methods only, and nothing else touches the window or the
// table of holds. Each verb has one meaning throughout the package: admit
// lets a first attempt go, chargeRetry charges a retry, observe takes what
// an attempt said about its scopes. The parts below have their own: the
// window deposits and withdraws, the hold table passes, records and fails
// a probe.

// admit lets a first attempt of the scopes s1 and s2 (of kind
// noScope: none) go, once neither is held, or as the probe of the one
// held (then it returns the probe's id, for observe): it waits meanwhile,
// until ctx ends, or is refused at once when it cannot wait. It deposits
// the attempt unless a loop charged it.
func (b *Budget) admit(ctx context.Context, canWait bool, s1, s2 scope, charged bool) (probe uint64, err error) {
	if b.Hold > 0 && (s1.kind != noScope || s2.kind != noScope) {
		if probe, err = b.holds.pass(ctx, canWait, b.time(), b.timing(), s1, s2); err != nil {
			return 0, err
		}
	}
	if !charged {
		b.window.deposit(b.now(), b.limits())
	}
	return probe, nil
}

// chargeRetry charges a retry of the scopes s1 and s2: refused at once
// when one of them is held (it returns that scope and held true), else
// withdrawn from the window unless a loop charged it. When the window
// refuses it, the hold of failed starts (of kind noScope: none), after
// cause, the failure the retry follows.
func (b *Budget) chargeRetry(s1, s2 scope, charged bool, failed scope, cause failure) (heldScope scope, held, ok bool) {
	if b.Hold > 0 && (s1.kind != noScope || s2.kind != noScope) {
		if s, held := b.holds.refuseHeld(s1, s2); held {
			return s, true, false
		}
	}
	if charged || b.window.withdraw(b.now(), b.limits()) {
		return scope{}, false, true
	}
	if b.Hold > 0 && failed.kind != noScope {
		if ch := b.holds.start(failed, b.time().holdClock().Now(), b.timing(), cause); ch.n > 0 {
			b.holds.deliver(b.OnHold, ch)
		}
	}
	return scope{}, false, false
}

// observe takes what an attempt, a first one (first) or not, sent
// as probe (0: not a probe), said about its scopes, and delivers the
// events of the holds that it started or ended.
func (b *Budget) observe(first bool, probe uint64, o1, o2 observation) {
	if b.Hold <= 0 {
		return
	}
	if ch := b.holds.record(first, probe, b.time(), b.timing(), o1, o2); ch.n > 0 {
		b.holds.deliver(b.OnHold, ch)
	}
}

// probePanicked frees the slot of probe, whose attempt or request
// panicked, as a failed probe's.
func (b *Budget) probePanicked(probe uint64) {
	b.holds.failProbe(probe, b.time(), b.timing())
}

// nameProbeError returns the error of probe, which failed with err, an error
// of the transport: err named with the scope probed and how long it has
// been held (see probeError), or err when the hold ended meanwhile, and a
// bare io.EOF or io.ErrUnexpectedEOF as it is (client-go compares those,
// not their text).
func (b *Budget) nameProbeError(probe uint64, s1, s2 scope, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return err
	}
	if s, held, ok := b.holds.probeHeld(probe, s1, s2, b.time()); ok {
		return &probeError{scope: s, held: held, err: err}
	}
	return err
}

// loopScope is the scope of a loop's attempts: every loop together on a
// Budget not on the wire; none on the wire, where the requests have
// theirs.
func (b *Budget) loopScope() scope {
	if b.onWire() {
		return scope{}
	}
	return scope{kind: loopsScope}
}

// The loops' side: a loop given WithBudget(b) holds b (nil for none) and
// calls these methods.

// admitLoop admits a loop's first attempt (see admit). On a Budget not
// on the wire it may wait during a hold until ctx ends (a loop that cannot
// wait is refused at once instead), or let the attempt go as the probe,
// whose id it returns.
func (b *Budget) admitLoop(ctx context.Context, canWait bool) (uint64, error) {
	return b.admit(ctx, canWait, b.loopScope(), scope{}, false)
}

// chargeLoopRetry charges a loop's retry (see chargeRetry); false when
// the budget refuses it. afterTransient tells a retry that follows a
// transient failure, last (the previous attempt's error).
func (b *Budget) chargeLoopRetry(afterTransient bool, last error) bool {
	var failed scope
	var cause failure
	if afterTransient {
		failed, cause = b.loopScope(), errFailure(last, b.time().holdClock().Now())
	}
	_, _, ok := b.chargeRetry(scope{}, scope{}, false, failed, cause)
	return ok
}

// observeLoop observes a loop's attempt that returned err, judged out (see
// observe): the first (first), the probe (probe > 0), or a retry.
func (b *Budget) observeLoop(first bool, probe uint64, out outcome, err error) {
	// A probe's slot is freed even when WrapTransport was called since.
	s := b.loopScope()
	if probe != 0 {
		s = scope{kind: loopsScope}
	} else if s.kind == noScope {
		return
	}
	var cause failure
	if out == failedTransiently {
		cause = errFailure(err, b.time().holdClock().Now())
	}
	b.observe(first, probe, observation{scope: s, out: out, cause: cause}, observation{})
}

// onWire reports whether the budget charges requests on the wire, so that
// a loop marks its attempts' contexts for WrapTransport.
func (b *Budget) onWire() bool { return b.wire.Load() != nil }

func (b *Budget) limits() windowLimits {
	return windowLimits{window: b.Window, ratio: b.Ratio, floor: b.MinPerSecond * b.Window.Seconds()}
}

func (b *Budget) timing() holdTiming {
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return newHoldTiming(b.Hold, r)
}

func (b *Budget) now() time.Time { return b.time().now() }

func (b *Budget) time() timeSource { return timeSource{b.Clock} }
