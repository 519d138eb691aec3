package retry

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Budget bounds the retries of every loop that shares it ([WithBudget]),
// and of every request through its [Budget.WrapTransport]: while a server
// fails, the loops of a process together add at most a fraction of their
// first attempts as retries, plus a small floor, instead of each
// multiplying its own load by its Steps. It is the retry budget of
// Finagle (RetryBudget) and Envoy, and the retry throttling of gRPC. Use
// one Budget per API server a process talks to; [NewBudget] gives one made
// for a controller, and docs/outages.md says how to use it.
//
// Each loop call given the Budget deposits one first attempt when it makes
// its first attempt, and withdraws one retry before each wait that leads to
// another attempt (the capped last wait of a loop, which no attempt follows,
// withdraws nothing). A withdrawal is granted only while the retries
// withdrawn during the last Window, this one included, stay within
//
//	floor(MinPerSecond*Window.Seconds() + Ratio*(first attempts deposited during the last Window))
//
// computed in float64. An entry counts from its time t until t+Window. The
// counts are kept in ten sub-windows of Window/10 each, so memory does not
// grow with the request rate; a first attempt may then stop counting up to
// Window/10 early and a retry up to Window/10 late, which only lowers what
// is granted, never raises it. Time is the latest reading of Clock seen so
// far: a clock that goes backwards counts as standing still. A reading too
// far from the first to number its sub-window (292 years on, or decades
// with a Window of nanoseconds, as a fake clock may jump) starts the count
// afresh: first attempts are dropped, and retries too when the jump is 1.1
// Windows or more, so the bound still holds.
//
// A retry budget bounds retries, never new calls: a caller that makes no
// retries of its own but calls again after each error keeps its load
// whatever the budget says. Hold bounds those too; see its field.
//
// The zero Budget is invalid (its Window is 0). A Budget is safe for
// concurrent use by any number of loops and transports; its fields must
// not change after its first use, and it must not be copied after its
// first use.
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
	// A hold is kept per scope. A Budget whose WrapTransport was never
	// called has one scope, every loop given it. Once WrapTransport has
	// been called the Budget holds on the wire only, where each request
	// has two scopes: its server (the URL's scheme and host) and, for a
	// path of the Kubernetes API, its resource (the API group, the
	// resource, a subresource counting as its resource, a group's
	// discovery as the group alone; and the verb class: GET and HEAD read,
	// the other methods write). A request that got no HTTP response, and
	// a 429, count against the server; a 5xx other than 501 against the
	// resource, or the server when the path names none. A loop given
	// [WithBudget] for a Budget on the wire then charges its first attempt
	// and retries but holds nothing itself: its requests are held on the
	// wire.
	//
	// A scope's hold starts when the budget refuses a retry that follows
	// a transient failure of that scope ([IsTransient], a 429 or 5xx
	// response, a transport error; never a Conflict, not even the quota
	// admission's that IsTransient accepts); or when at least 3 first
	// attempts of the scope failed transiently within 10*Hold with no
	// success since the first of them. On the wire a refused retry starts
	// a hold only when it is a client-go resend, and only in the scope
	// whose failure it follows, whatever else failed meanwhile: the
	// server's after no response or a 429, the resource's after a 5xx. A
	// loop's later attempt refused on the wire, by the loop's WithBudget
	// or by WrapTransport, starts none: the wire does not know which scope
	// the loop's previous attempt failed, and that scope's own failed
	// first attempts start its hold. While it lasts, each first attempt of
	// the scope (a loop call's first attempt, a request through
	// WrapTransport that is not a retry) waits without sending until the
	// hold ends or its
	// context ends (then the error matches both the context's error and
	// [ErrBudgetExhausted]). A request whose server and resource are both
	// held waits for the server first. The loops whose fn takes no context
	// ([OnError], [RetryOnConflict], [OnRetryAfterError]) have nothing to
	// bound a wait with: their first attempt is refused at once during a
	// hold, with an error matching ErrBudgetExhausted. On the wire a held
	// scope refuses its retries at once (client-go's resends, a loop's
	// later attempts after a transient failure); a loop's retries on a
	// Budget not on the wire are never held, the bound above limits them.
	// The error of a hold or a refusal on the wire names the scope: "writes
	// of deployments.apps", "reads of configmaps", a group's discovery as
	// the group, a server as https://HOST:PORT.
	//
	// One probe at a time per scope goes through meanwhile: the first Hold
	// after the hold started, each next one an interval after the previous
	// one went, the interval starting at Hold and doubling after each
	// failed probe up to 5*Hold or 1s, whichever is less (never below
	// Hold). A probe fails when it fails transiently, when it has no answer
	// within the interval (then the next may go), or when it panics (the
	// panic goes on; the slot is freed). A probe that its context or a
	// Budget ended says nothing: it frees the slot, and the interval stays.
	// What ends a hold and lets every waiting call go: any attempt of a
	// Budget not on the wire that succeeds (that was answered other than
	// with a transient failure); on the wire, a response other than 429
	// ends its server's hold (but a 5xx does not when the path names no
	// resource), and a response neither 429 nor 5xx ends its resource's.
	//
	// A Budget keeps at most 512 scopes: a scope is kept from its first
	// failure to its next success; when the table is full, the scopes
	// neither held nor failed within 10*Hold are forgotten, and then the
	// one whose last failure is the oldest, its hold ended.
	Hold time.Duration

	// OnHold, when set, is called once when a scope's hold starts and once
	// when it ends (a scope that a full table replaces ends too). It is
	// called outside the budget's locks, on the goroutine whose attempt or
	// request started or ended the hold; the calls for one scope come in
	// order, its start then its end, and never overlap. It must return
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
// only grows. It is for metrics (a Prometheus CounterFunc per field).
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
// Ratio 0.1, MinPerSecond 3, Window 1s and Hold 100ms. Put it on the
// controller's rest.Config (cfg.Wrap(budget.WrapTransport)); see
// docs/outages.md for how these values were chosen and measured.
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

// loopBudget is what a loop knows of the Budget given to it with
// [WithBudget]; *Budget is the one implementation.
type loopBudget interface {
	// admit charges the loop's first attempt. On a Budget not on the wire
	// it may wait during a hold until ctx ends (a loop that cannot wait is
	// refused at once instead), or let the attempt go as the probe, whose
	// id it returns.
	admit(ctx context.Context, canWait bool) (probe uint64, err error)
	// withdraw charges a retry; false when the budget refuses it.
	// afterTransient tells a retry that follows a transient failure, last
	// (the previous attempt's error).
	withdraw(afterTransient bool, last error) bool
	// observe takes the outcome of an attempt that returned err: the first
	// (first), the probe (probe > 0), or a retry.
	observe(first bool, probe uint64, out outcome, err error)
	// probePanicked frees the slot of the probe whose attempt panicked, as
	// a failed probe's.
	probePanicked(probe uint64)
	// onWire reports whether the budget charges requests on the wire, so
	// that the loop marks its attempts' contexts for WrapTransport.
	onWire() bool
}

func (b *Budget) admit(ctx context.Context, canWait bool) (uint64, error) {
	var probe uint64
	if b.Hold > 0 && !b.onWire() {
		var err error
		if probe, err = b.holds.admit(ctx, canWait, b.time(), b.timing(), scope{kind: loopsScope}, scope{}); err != nil {
			return 0, err
		}
	}
	b.window.deposit(b.now(), b.limits())
	return probe, nil
}

func (b *Budget) withdraw(afterTransient bool, last error) bool {
	if b.window.withdraw(b.now(), b.limits()) {
		return true
	}
	if afterTransient && b.Hold > 0 && !b.onWire() {
		b.startHold(scope{kind: loopsScope}, failure{err: last})
	}
	return false
}

func (b *Budget) observe(first bool, probe uint64, out outcome, err error) {
	// A probe's slot is freed even when WrapTransport was called since.
	if b.Hold > 0 && (probe != 0 || !b.onWire()) {
		b.observeScopes(first, probe, observation{scope: scope{kind: loopsScope}, out: out, cause: failure{err: err}}, observation{})
	}
}

// startHold starts the hold of s after a refused retry that followed
// cause, and delivers its events.
func (b *Budget) startHold(s scope, cause failure) {
	if ch := b.holds.start(s, b.time().holdClock().Now(), b.timing(), cause); ch.n > 0 {
		b.holds.deliver(b.OnHold, ch, 0)
	}
}

// observeScopes takes what an attempt said about its scopes (of kind
// noScope: none), and delivers the events of the holds it started or
// ended.
func (b *Budget) observeScopes(first bool, probe uint64, o1, o2 observation) {
	if ch := b.holds.observe(first, probe, b.time(), b.timing(), o1, o2); ch.n > 0 {
		b.holds.deliver(b.OnHold, ch, 0)
	}
}

func (b *Budget) probePanicked(probe uint64) {
	b.holds.probePanicked(probe, b.time(), b.timing())
}

func (b *Budget) onWire() bool { return b.wire.Load() != nil }

func (b *Budget) limits() windowLimits {
	return windowLimits{window: b.Window, ratio: b.Ratio, floor: b.MinPerSecond * b.Window.Seconds()}
}

func (b *Budget) timing() holdTiming { return newHoldTiming(b.Hold) }

func (b *Budget) now() time.Time { return b.time().now() }

func (b *Budget) time() timeSource { return timeSource{b.Clock} }

// timeSource is a Budget's one source of time: its Clock, or real time
// when nil. The hold reads the time and runs its timers on the Clock when
// the Clock can make timers; on real time otherwise, as a Clock that only
// reads the time cannot wake a waiting call.
type timeSource struct{ clock clock.PassiveClock }

// now is the retry window's time.
func (ts timeSource) now() time.Time {
	if ts.clock == nil {
		return time.Now()
	}
	return ts.clock.Now()
}

// holdClock is the hold's time.
func (ts timeSource) holdClock() clock.Clock {
	if c, ok := ts.clock.(clock.Clock); ok {
		return c
	}
	return clock.RealClock{}
}
