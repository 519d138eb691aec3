package retry_test

import (
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// await returns once cond holds, polling in short real sleeps: other
// goroutines have settled (they wait on a fake clock, or are done). It
// fails the test after 10s.
func await(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// awaitWaiters returns once n goroutines wait on clk's timers: the calls a
// hold keeps waiting have settled, so the test may move the clock.
func awaitWaiters(t testing.TB, clk *testingclock.FakeClock, n int) {
	t.Helper()
	await(t, func() bool { return waiters(clk) == n }, "goroutines wait on the clock: not %d", n)
}

// waiters returns the number of timers waiting on clk. FakeClock.Waiters
// came to k8s.io/utils in 2025: the versions that apimachinery v0.31 to
// v0.33 select lack it, and there the count is read under the clock's own
// lock (make compat tests both).
func waiters(clk *testingclock.FakeClock) int {
	if c, ok := any(clk).(interface{ Waiters() int }); ok {
		return c.Waiters()
	}
	v := reflect.ValueOf(clk).Elem()
	mu := (*sync.RWMutex)(unsafe.Pointer(v.FieldByName("lock").UnsafeAddr()))
	mu.RLock()
	defer mu.RUnlock()
	return v.FieldByName("waiters").Len()
}

// budgetLimits are a Budget's retry limits: Ratio, MinPerSecond, Window.
type budgetLimits struct {
	ratio, minPerSecond float64
	window              time.Duration
}

var (
	// noRetries grants no retry at all, so that the first retry after a
	// transient failure is refused and starts a hold.
	noRetries = budgetLimits{window: time.Minute}
	// freeRetries grants every retry a test makes: only the hold acts.
	freeRetries = budgetLimits{ratio: 1, minPerSecond: 100, window: 10 * time.Second}
	// finagleLimits are Finagle's defaults.
	finagleLimits = budgetLimits{ratio: 0.2, minPerSecond: 10, window: 10 * time.Second}
)

// newBudget is the tests' one builder of a Budget: retry limits lim,
// Hold hold, on clk (nil: real time), each probe waiting its whole
// interval (fullInterval).
func newBudget(clk *testingclock.FakeClock, lim budgetLimits, hold time.Duration) *retry.Budget {
	b := &retry.Budget{Ratio: lim.ratio, MinPerSecond: lim.minPerSecond, Window: lim.window, Hold: hold, Rand: fullInterval}
	if clk != nil {
		b.Clock = clk
	}
	return b
}

// onHold returns a Budget with no retries and hold on a fake clock at t0,
// whose hold has started.
func onHold(t testing.TB, hold time.Duration) (*testingclock.FakeClock, *retry.Budget) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, hold)
	startHold(t, b)
	return clk, b
}

// startHold makes b refuse a retry after a transient failure, which
// starts its hold.
func startHold(t testing.TB, b *retry.Budget) {
	t.Helper()
	err := retry.OnError(retry.Backoff{Steps: 2}, retry.IsTransient, func() error { return errDown },
		retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
}

// fullInterval is a Budget's Rand that makes each probe wait its whole
// interval, the schedule's upper bound, so that tests know when it goes.
func fullInterval() float64 { return 1 }

// wgGo runs f in a goroutine counted by wg: sync.WaitGroup.Go (Go 1.25)
// for the module's Go 1.22 floor.
func wgGo(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}
