package retry

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

var (
	// ErrBudgetExhausted is matched (with errors.Is) by the error of a loop
	// that a [Budget] refused a retry. That error also wraps the last
	// attempt's error.
	ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
	// ErrInvalidBudget is wrapped by the error of [Budget.Validate], and so
	// by that of a loop given an invalid or nil Budget through [WithBudget].
	ErrInvalidBudget = errors.New("retry: invalid budget")
)

// budgetsOnWire is set once any Budget's WrapTransport has been called,
// and budgetsRefused once any Budget has refused or held anything: until
// then no transport reads a loop's marks, and no error is a Budget's
// refusal, so the loops need not look for them.
var budgetsOnWire, budgetsRefused atomic.Bool

// budgetSlots is the number of sub-windows a Window is counted in.
const budgetSlots = 10

// Budget bounds the retries of every loop that shares it ([WithBudget]),
// and of every request through its [Budget.WrapTransport]: while a server
// fails, the loops of a process together add at most a fraction of their
// first attempts as retries, plus a small floor, instead of each
// multiplying its own load by its Steps. It is the retry budget of
// Finagle (RetryBudget) and Envoy, and the retry throttling of gRPC. Use
// one Budget per API server a process talks to; [NewBudget] gives one made
// for a controller.
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
// Finagle's defaults are Ratio 0.2, MinPerSecond 10 and Window 10s. The
// zero Budget is invalid (its Window is 0). A Budget is safe for concurrent
// use by any number of loops and transports; its fields must not change
// after its first use, and it must not be copied after its first use.
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
	// Hold, when above 0, makes new calls wait while the server fails, so
	// that a caller that calls again after an error adds no load either.
	// A hold starts when the budget refuses a retry that follows a
	// transient failure ([IsTransient], a 429 or 5xx response, a transport
	// error; never a Conflict, not even the quota admission's that
	// IsTransient accepts), or when at least 3 first attempts failed
	// transiently within 10*Hold with no attempt succeeding since the
	// first of them. While it lasts, each first attempt the budget sees (a
	// loop call's first attempt, a request through [Budget.WrapTransport]
	// that is not a retry) waits without sending until the hold ends or
	// its context ends (then the error matches both the context's error
	// and [ErrBudgetExhausted]). The loops whose fn takes no context
	// ([OnError], [RetryOnConflict], [OnRetryAfterError]) have nothing to
	// bound a wait with: their first attempt is refused at once during a
	// hold, with an error matching ErrBudgetExhausted.
	//
	// One probe at a time goes through meanwhile: the first Hold after
	// the hold started, each next one an interval after the previous one
	// went, the interval starting at Hold and doubling after each failed
	// probe up to 10*Hold or 1s, whichever is less (never below Hold). A
	// probe fails when it fails transiently, when it has no answer within
	// the interval (then the next may go), or when it panics (the panic
	// goes on; the slot is freed). A probe that its context or a Budget
	// ended says nothing about the server: it frees the slot, and the
	// interval stays. Any attempt that succeeds (one that the server
	// answered other than with a transient failure; on the wire, a
	// response neither 429 nor 5xx), a probe or one already in flight,
	// ends the hold and lets every waiting call go. Retries are never
	// held: the bound above limits them as before. Zero means no hold, the
	// budget of the third revision; below 0 is invalid.
	Hold time.Duration

	mu         sync.Mutex
	started    bool
	base       time.Time // the first reading; sub-windows are counted from it
	latest     time.Time // the latest reading
	cur        uint64    // the sub-window of the latest reading
	firsts     [budgetSlots + 1]int64
	retries    [budgetSlots + 1]int64
	firstTotal int64 // first attempts in the newest budgetSlots sub-windows
	retryTotal int64 // retries in all budgetSlots+1 sub-windows
	stats      BudgetStats
	hold       holdState                   // under mu; see hold.go
	holding    atomic.Bool                 // hold.on, read without the lock
	failing    atomic.Bool                 // hold.failures > 0, read without the lock
	resends    atomic.Pointer[resendTable] // set by WrapTransport; see transport.go
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
// Ratio 0.1, MinPerSecond 3, Window 1s and Hold 100ms, chosen from outage
// runs of 16 workers of one controller writing through typed clients
// across 5s of reset connections (integration/cmd/outages).
//
// A controller on a healthy server retries little (a Conflict now and
// then): a tenth of its calls as retries, and three a second whatever its
// rate (a lone call's Conflicts), is room enough. Conflicts are retries
// too: writers that contend for one hot object want a Budget of their own
// with a higher Ratio, or none. Finagle's 0.2, 10/s and 10s suit RPC
// servers: its floor alone grants 100 retries a Window, more than a
// controller's whole load through a 5s outage. A Window of 1s keeps the
// retries granted when an outage begins to a tenth of the last second's
// calls. It also makes client-go's own resends, which come 1s or more
// after the failure (after a reset GET, or a Retry-After of 1s or more),
// first attempts for [Budget.WrapTransport]: during a hold they wait
// instead of being sent (a resend after a Retry-After of 0 is still a
// retry).
//
// Hold 100ms sends probes 100ms after the hold starts, then 200ms, 400ms
// and 800ms after the previous one, then every 1s: a server that is back
// is found within a second, with 7 probes in a 5s outage. Hold 25ms, or a
// Window of 3s, sent more requests during those outages without bringing
// the callers back sooner (client-go's own 1s wait after a reset GET sets
// that). A false hold (an HTTP/2 connection that drops fails every request
// on it at once) delays new calls by about 100ms.
func NewBudget() *Budget {
	return &Budget{Ratio: 0.1, MinPerSecond: 3, Window: time.Second, Hold: 100 * time.Millisecond}
}

// Stats returns the budget's counters. It is safe for concurrent use; a
// nil *Budget gives zeros.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
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

// deposit counts one first attempt.
func (b *Budget) deposit() {
	now := b.now() // outside the lock: reading a clock can cost more than the rest
	b.mu.Lock()
	b.depositLocked(now)
	b.mu.Unlock()
}

func (b *Budget) depositLocked(now time.Time) {
	slot := b.advance(now)
	b.firsts[slot]++
	b.firstTotal++
	b.stats.FirstAttempts++
}

// withdraw counts one retry and reports true, or reports false, counting
// nothing, when the retry would exceed the bound. A refusal of a retry
// that follows a transient failure (afterTransient) starts a hold.
func (b *Budget) withdraw(afterTransient bool) bool {
	now := b.now()
	b.mu.Lock()
	slot := b.advance(now)
	allowed := math.Floor(b.MinPerSecond*b.Window.Seconds() + b.Ratio*float64(b.firstTotal))
	if float64(b.retryTotal+1) > allowed {
		if !budgetsRefused.Load() {
			budgetsRefused.Store(true)
		}
		b.stats.Refused++
		b.mu.Unlock()
		if afterTransient && b.Hold > 0 {
			b.startHold()
		}
		return false
	}
	b.retries[slot]++
	b.retryTotal++
	b.stats.Retries++
	b.mu.Unlock()
	return true
}

func (b *Budget) now() time.Time {
	if b.Clock == nil {
		return time.Now()
	}
	return b.Clock.Now()
}

// advance moves the current sub-window forward to now,
// dropping what no longer counts, and returns the current sub-window's
// slot. Sub-window k spans [k, k+1) * Window/budgetSlots from the first
// reading. A first attempt counts while it is in one of the newest
// budgetSlots sub-windows (so it stops counting within Window/budgetSlots
// before its time is up), a retry while it is in one of the newest
// budgetSlots+1 (so it stops within Window/budgetSlots after).
func (b *Budget) advance(now time.Time) int {
	if !b.started {
		b.started, b.base, b.latest = true, now, now
	}
	var k uint64
	if elapsed := now.Sub(b.base); elapsed > 0 {
		// floor(elapsed*budgetSlots/Window) without overflow.
		hi, lo := bits.Mul64(uint64(elapsed), budgetSlots)
		if elapsed == maxDuration || hi >= uint64(b.Window) {
			// now.Sub saturated (now is over 292 years after base), or the
			// quotient does not fit in 64 bits (a Window of a few ns, now
			// decades after base): number the sub-windows afresh from now.
			b.restart(now)
			return 0
		}
		k, _ = bits.Div64(hi, lo, uint64(b.Window))
	}
	if now.After(b.latest) {
		b.latest = now
	}
	const n = budgetSlots + 1
	switch {
	case k <= b.cur: // the same sub-window, or a clock that went back
	case k-b.cur >= n:
		b.firsts, b.retries = [n]int64{}, [n]int64{}
		b.firstTotal, b.retryTotal = 0, 0
		b.cur = k
	default:
		for b.cur < k {
			b.cur++
			// Sub-window cur-budgetSlots leaves the first attempts' count;
			// cur takes the slot of cur-n, which leaves the retries'.
			b.firstTotal -= b.firsts[(b.cur+1)%n]
			slot := b.cur % n
			b.retryTotal -= b.retries[slot]
			b.firsts[slot], b.retries[slot] = 0, 0
		}
	}
	return int(b.cur % n)
}

// restart makes now the start of sub-window 0, for a now too far from
// base to number its sub-window. First attempts are dropped, which only
// lowers what is granted. Retries are dropped when the latest reading is
// at least 1.1 Windows before now, so that none still counts; otherwise
// they are kept in now's sub-window, which counts them late, never early.
func (b *Budget) restart(now time.Time) {
	keep := b.retryTotal
	// gap >= Window + ceil(Window/10), written so that nothing overflows.
	if gap := now.Sub(b.latest); gap >= b.Window && gap-b.Window > (b.Window-1)/budgetSlots {
		keep = 0
	}
	const n = budgetSlots + 1
	b.firsts, b.retries = [n]int64{}, [n]int64{}
	b.firstTotal, b.retryTotal = 0, keep
	b.retries[0] = keep
	b.base, b.latest, b.cur = now, now, 0
}

// budgetError is returned when a Budget refuses a retry.
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
