package retry_test

// The hold of a Budget not on the wire, as its loops meet it: what starts
// it, what waits and what is refused meanwhile, what ends it. Its probes'
// schedule: budget_probe_test.go; the holds per scope on the wire:
// budget_scope_test.go; scopeHold's own (its drawn waits too):
// budget_hold_internal_test.go; its events: budget_events_test.go.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// holds reports whether b makes a new call wait now: a context loop's
// call either returns at once or waits on clk. A call that waits is then
// cancelled, and its error checked. It must not be asked when a probe is
// due: the call would go as the probe.
func holds(t *testing.T, clk *testingclock.FakeClock, b *retry.Budget) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 1}, retry.IsTransient,
			func(context.Context) error { return nil }, retry.WithBudget(b))
	}()
	var err error
	returned := false
	await(t, func() bool {
		select {
		case err = <-done:
			returned = true
			return true
		default:
			return clk.HasWaiters()
		}
	}, "the call neither returned nor waited")
	if returned {
		require.NoError(t, err)
		return false
	}
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	return true
}

func TestHoldStartsWhenARetryAfterATransientFailureIsRefused(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, 100*time.Millisecond)
	require.False(t, holds(t, clk, b), "no hold before a refusal")
	startHold(t, b)
	require.True(t, holds(t, clk, b))

	// A call that comes now waits, and goes as the probe Hold after the
	// refusal; its success ends the hold.
	sent := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient,
			func(context.Context) error { sent <- clk.Now(); return nil }, retry.WithBudget(b))
	}()
	awaitWaiters(t, clk, 1)
	clk.Step(99 * time.Millisecond)
	awaitWaiters(t, clk, 1)
	assert.Empty(t, sent, "sent before the first probe's time")
	clk.Step(time.Millisecond)
	require.NoError(t, <-errc)
	assert.Equal(t, t0.Add(100*time.Millisecond), <-sent)
	assert.False(t, holds(t, clk, b), "the probe's success ended the hold")
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 4, Refused: 1, Held: 2, Probes: 1}, b.Stats(),
		"startHold's call, the two calls of holds that went at once, and the probe deposited; "+
			"the call of holds that waited and the probe were held")
}

func TestHoldNotStartedByRefusalsOfOtherErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		retriable func(error) bool
	}{
		{"Conflict", conflict(1), apierrors.IsConflict},
		{"the quota admission's Conflict, which IsTransient accepts", quotaConflict(), retry.IsTransient},
		{"NotFound retried by the caller's predicate", apierrors.NewNotFound(counterResource, "x"), always},
		{"Forbidden", apierrors.NewForbidden(counterResource, "x", errors.New("no")), always},
		{"a 501", apierrors.NewGenericServerResponse(501, "GET", counterResource, "x", "", 0, false), always},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := newBudget(clk, noRetries, 100*time.Millisecond)
			for range 5 {
				err := retry.OnError(retry.Backoff{Steps: 3}, tt.retriable, func() error { return tt.err }, retry.WithBudget(b))
				require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			}
			assert.False(t, holds(t, clk, b))
			assert.Equal(t, uint64(5), b.Stats().Refused)
		})
	}
}

func TestHoldZeroNeverHolds(t *testing.T) {
	t.Parallel()
	clk, b := onHold(t, 0)
	for range 10 {
		require.ErrorIs(t, retry.OnError(retry.Backoff{Steps: 1}, retry.IsTransient, func() error { return errDown }, retry.WithBudget(b)), errDown)
	}
	assert.False(t, holds(t, clk, b))
	assert.Zero(t, b.Stats().Held)
}

// TestHoldStartsAfterFailedFirstAttempts: for callers that make no retries
// but call again, 3 first attempts that fail transiently within 10*Hold,
// with no success among them, start a hold.
func TestHoldStartsAfterFailedFirstAttempts(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	fail := func(b *retry.Budget, err error) func() {
		return func() {
			_ = retry.OnError(retry.Backoff{Steps: 1}, always, func() error { return err }, retry.WithBudget(b))
		}
	}
	tests := []struct {
		name  string
		steps func(b *retry.Budget, clk *testingclock.FakeClock) []func()
		want  bool
	}{
		{"three within 10*Hold", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), step(clk, 400*time.Millisecond), fail(b, errDown), step(clk, 599*time.Millisecond), fail(b, errDown)}
		}, true},
		{"three at once", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), fail(b, errDown), fail(b, errDown)}
		}, true},
		{"three spanning 10*Hold", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), step(clk, 500*time.Millisecond), fail(b, errDown), step(clk, 500*time.Millisecond), fail(b, errDown)}
		}, false},
		{"the last three of four within 10*Hold", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), step(clk, 2*time.Second), fail(b, errDown), fail(b, errDown), step(clk, 999*time.Millisecond), fail(b, errDown)}
		}, true},
		{"two", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), fail(b, errDown)}
		}, false},
		{"a success among them", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), fail(b, errDown), fail(b, nil), fail(b, errDown), fail(b, errDown)}
		}, false},
		{"a Conflict among them is an answer", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), fail(b, errDown), fail(b, conflict(1)), fail(b, errDown), fail(b, errDown)}
		}, false},
		{"Conflicts", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, conflict(1)), fail(b, conflict(2)), fail(b, conflict(3))}
		}, false},
		{"the quota admission's Conflicts", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, quotaConflict()), fail(b, quotaConflict()), fail(b, quotaConflict())}
		}, false},
		{"context errors say nothing", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), fail(b, context.Canceled), fail(b, context.DeadlineExceeded), fail(b, errDown)}
		}, false},
		{"retries do not count", func(b *retry.Budget, clk *testingclock.FakeClock) []func() {
			return []func(){fail(b, errDown), func() {
				_ = retry.OnError(retry.Backoff{Steps: 5}, always, func() error { return errDown }, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
			}}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: time.Minute, Hold: hold, Clock: clk, Rand: fullInterval}
			for _, s := range tt.steps(b, clk) {
				s()
			}
			assert.Equal(t, tt.want, holds(t, clk, b))
			assert.Zero(t, b.Stats().Refused, "the budget had retries to spare")
		})
	}
}

func step(clk *testingclock.FakeClock, d time.Duration) func() { return func() { clk.Step(d) } }

// holdWorkers are goroutines that call a context loop with WithBudget(b)
// again and again until stopped, each call one attempt (Steps 1) of
// attempt unless startLoops says otherwise; they record the time of each
// attempt.
type holdWorkers struct {
	clk   *testingclock.FakeClock
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	sent  []time.Time
	calls int
}

func (w *holdWorkers) times() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.sent...)
}

func (w *holdWorkers) end() {
	w.stop()
	w.wg.Wait()
}

func startWorkers(clk *testingclock.FakeClock, b *retry.Budget, n int, attempt func(call int) error) *holdWorkers {
	return startLoops(clk, b, n, retry.Backoff{Steps: 1}, attempt)
}

// startLoops is startWorkers whose calls are loops of backoff.
func startLoops(clk *testingclock.FakeClock, b *retry.Budget, n int, backoff retry.Backoff, attempt func(call int) error) *holdWorkers {
	ctx, cancel := context.WithCancel(context.Background())
	w := &holdWorkers{clk: clk, stop: cancel}
	for range n {
		wgGo(&w.wg, func() {
			for ctx.Err() == nil {
				_ = retry.OnErrorWithContext(ctx, backoff, retry.IsTransient, func(context.Context) error {
					w.mu.Lock()
					w.sent = append(w.sent, clk.Now())
					w.calls++
					call := w.calls
					w.mu.Unlock()
					return attempt(call)
				}, retry.WithBudget(b))
			}
		})
	}
	return w
}

// TestHoldRefusalDuringAHold: a refusal during a hold leaves it as it is.
// Each probe's loop retries its failure and the budget refuses that retry,
// a refusal after a transient failure; the probes keep the schedule.
func TestHoldRefusalDuringAHold(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold) // Ratio 0, no floor: every retry refused
	const n = 2
	w := startLoops(clk, b, n, retry.Backoff{Steps: 2}, func(int) error { return errDown })
	defer w.end()
	until := t0.Add(3 * time.Second)
	for clk.Now().Before(until) {
		awaitWaiters(t, clk, n)
		clk.Step(hold / 2)
	}
	awaitWaiters(t, clk, n)
	want := probeSchedule(t0, hold, until)
	assert.Equal(t, want, w.times())
	assert.Equal(t, uint64(1+len(want)), b.Stats().Refused, "onHold's refusal and each probe's retry")
}

// TestHoldSuccessReleasesEveryWaiter: the probe's success lets every
// waiting call go at once; each call waited (Held) and only one probed.
func TestHoldSuccessReleasesEveryWaiter(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	const n = 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent []time.Time
	for range n {
		wgGo(&wg, func() {
			err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient, func(context.Context) error {
				mu.Lock()
				sent = append(sent, clk.Now())
				mu.Unlock()
				return nil
			}, retry.WithBudget(b))
			assert.NoError(t, err)
		})
	}
	awaitWaiters(t, clk, n)
	clk.Step(hold)
	wg.Wait()
	require.Len(t, sent, n)
	for _, at := range sent {
		assert.Equal(t, t0.Add(hold), at)
	}
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 1 + n, Refused: 1, Held: n, Probes: 1}, b.Stats())
}

// TestHoldRetriesAreNotHeld: a loop whose first attempt went before the
// hold keeps its retries, which the bound grants; a retry that succeeds
// ends the hold.
func TestHoldRetriesAreNotHeld(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{MinPerSecond: 1, Window: 10 * time.Second, Hold: 100 * time.Millisecond, Clock: clk, Rand: fullInterval}
	for range 2 {
		_ = retry.OnError(retry.Backoff{Steps: 1}, always, func() error { return errDown }, retry.WithBudget(b))
	}
	attempts := 0
	err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 5}, retry.IsTransient, func(context.Context) error {
		attempts++
		switch attempts {
		case 1: // the third failure: the hold starts
			return errDown
		case 2:
			assert.True(t, holds(t, clk, b), "the hold is on while the loop retries")
			return errDown
		}
		return nil
	}, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
	require.NoError(t, err)
	assert.Equal(t, 3, attempts)
	assert.False(t, holds(t, clk, b), "the retry's success ended the hold")
}

// TestHoldContextEndsTheWait: a call whose context ends while it waits
// returns an error matching the context's error, its cause and
// ErrBudgetExhausted, having called nothing; OnDone sees 0 attempts.
func TestHoldContextEndsTheWait(t *testing.T) {
	t.Parallel()
	cause := errors.New("the reconcile was cancelled")
	tests := []struct {
		name  string
		ctx   func() (context.Context, func())
		match []error
	}{
		{"cancel with a cause", func() (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(context.Background())
			return ctx, func() { cancel(cause) }
		}, []error{context.Canceled, cause}},
		{"deadline", func() (context.Context, func()) {
			ctx := &expiring{Context: context.Background(), done: make(chan struct{})}
			return ctx, ctx.expire
		}, []error{context.DeadlineExceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk, b := onHold(t, time.Second)
			ctx, end := tt.ctx()
			var done []retry.DoneEvent
			calls := 0
			errc := make(chan error, 1)
			go func() {
				_, err := retry.OnErrorValue(ctx, retry.Backoff{Steps: 3}, retry.IsTransient,
					func(context.Context) (int, error) { calls++; return 1, nil },
					retry.WithBudget(b), retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
				errc <- err
			}()
			awaitWaiters(t, clk, 1)
			end()
			err := <-errc
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			for _, m := range tt.match {
				require.ErrorIs(t, err, m)
			}
			assert.Regexp(t, "^retry: retry budget exhausted: the call waited for the budget's hold, until ", err.Error())
			assert.False(t, retry.IsTransient(err))
			assert.Zero(t, calls)
			assert.Equal(t, []retry.DoneEvent{{Attempts: 0, Err: err}}, done)
			assert.Equal(t, uint64(1), b.Stats().Held)
			assert.False(t, clk.HasWaiters(), "the wait's timer is stopped")
		})
	}
}

// expiring is a Context whose deadline passes when the test says so.
type expiring struct {
	context.Context
	done    chan struct{}
	expired atomic.Bool
}

func (c *expiring) Done() <-chan struct{} { return c.done }

func (c *expiring) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *expiring) expire() {
	c.expired.Store(true)
	close(c.done)
}

// TestHoldRefusesLoopsWithoutContext: the loops whose fn takes no context
// have nothing to bound a wait with: during a hold their first attempt is
// refused at once.
func TestHoldRefusesLoopsWithoutContext(t *testing.T) {
	t.Parallel()
	loops := map[string]func(b *retry.Budget, fn func() error, opts ...retry.Option) error{
		"OnError": func(b *retry.Budget, fn func() error, opts ...retry.Option) error {
			return retry.OnError(retry.DefaultRetry, always, fn, append(opts, retry.WithBudget(b))...)
		},
		"RetryOnConflict": func(b *retry.Budget, fn func() error, opts ...retry.Option) error {
			return retry.RetryOnConflict(retry.DefaultRetry, fn, append(opts, retry.WithBudget(b))...)
		},
		"OnRetryAfterError": func(b *retry.Budget, fn func() error, opts ...retry.Option) error {
			return retry.OnRetryAfterError(retry.DefaultRetry, always, fn, append(opts, retry.WithBudget(b))...)
		},
	}
	for name, loop := range loops {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk, b := onHold(t, time.Second)
			calls := 0
			var done []retry.DoneEvent
			err := loop(b, func() error { calls++; return nil }, retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			assert.Contains(t, err.Error(), "cannot wait")
			assert.Zero(t, calls)
			assert.Equal(t, []retry.DoneEvent{{Attempts: 0, Err: err}}, done)
			assert.Equal(t, retry.BudgetStats{FirstAttempts: 1, Refused: 2}, b.Stats())
			assert.False(t, clk.HasWaiters())
		})
	}
}

// TestHoldRealTimeWithAPassiveClock: with a Clock that makes no timers,
// the hold's timers run on real time (a Hold of 1ms here).
func TestHoldRealTimeWithAPassiveClock(t *testing.T) {
	t.Parallel()
	b := &retry.Budget{Window: time.Minute, Hold: time.Millisecond, Clock: testingclock.NewFakePassiveClock(t0), Rand: fullInterval}
	start := time.Now() // before the refusal, which the probe's 1ms is counted from
	startHold(t, b)
	err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient,
		func(context.Context) error { return nil }, retry.WithBudget(b))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), time.Millisecond, "it went as the probe, 1ms after the refusal")
	assert.Equal(t, uint64(1), b.Stats().Probes)
}

// TestHoldBudgetRefusalInsideAnAttempt: an attempt that returns an error
// a Budget refused (a transport's, or an inner loop's) ends the loop at
// once, whatever the predicate says: another attempt would only be
// refused as well.
func TestHoldBudgetRefusalInsideAnAttempt(t *testing.T) {
	t.Parallel()
	// An inner loop's refusal wraps its Conflict, so the conflict loops'
	// predicate would retry it.
	refusal := retry.RetryOnConflict(retry.Backoff{Steps: 2}, func() error { return conflict(9) },
		retry.WithBudget(&retry.Budget{Window: time.Minute}))
	require.ErrorIs(t, refusal, retry.ErrBudgetExhausted)
	require.True(t, apierrors.IsConflict(refusal))
	ctx := context.Background()
	loops := map[string]func(fn func() error, opts ...retry.Option) error{
		"OnError": func(fn func() error, opts ...retry.Option) error {
			return retry.OnError(retry.DefaultRetry, always, fn, opts...)
		},
		"RetryOnConflict": func(fn func() error, opts ...retry.Option) error {
			return retry.RetryOnConflict(retry.DefaultRetry, fn, opts...)
		},
		"OnErrorWithContext": func(fn func() error, opts ...retry.Option) error {
			return retry.OnErrorWithContext(ctx, retry.DefaultRetry, always, func(context.Context) error { return fn() }, opts...)
		},
		"RetryOnConflictWithContext": func(fn func() error, opts ...retry.Option) error {
			return retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error { return fn() }, opts...)
		},
		"UpdateOnConflict": func(fn func() error, opts ...retry.Option) error {
			c := newCalls()
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, c.get, c.claim("a"),
				func(context.Context, *Counter) (*Counter, error) { return nil, fn() }, opts...)
			return err
		},
	}
	for name, loop := range loops {
		for _, budget := range []*retry.Budget{nil, {MinPerSecond: 10, Window: time.Minute}} {
			t.Run(fmt.Sprintf("%s/budget %v", name, budget != nil), func(t *testing.T) {
				t.Parallel()
				calls, retries := 0, 0
				opts := []retry.Option{retry.WithOnRetry(func(retry.RetryEvent) { retries++ })}
				if budget != nil {
					opts = append(opts, retry.WithBudget(budget))
				}
				err := loop(func() error { calls++; return refusal }, opts...)
				assert.Same(t, refusal, err)
				assert.Equal(t, 1, calls)
				assert.Zero(t, retries)
			})
		}
	}
}

// outageSim drives workers that call a context loop on one Budget with a
// Hold, on a fake clock, through a healthy phase, an outage and a healthy
// phase again. Every worker always ends up waiting on the clock (the
// hold's timers, its Sleeper, its pause between calls), so the driver
// moves the clock only when every worker has settled.
type outageSim struct {
	clk        *testingclock.FakeClock
	budget     *retry.Budget
	down, up   time.Time // the outage: [down, up)
	mu         sync.Mutex
	firsts     []time.Time // first attempts during the outage
	attempts   int         // attempts of any kind
	retries    int         // attempts after the first
	firstCount int
	refusals   []time.Time // calls the budget refused during the outage
	successes  []time.Time // successful attempts after the outage
}

func (s *outageSim) isDown(at time.Time) bool { return !at.Before(s.down) && at.Before(s.up) }

func (s *outageSim) worker(ctx context.Context, rng *rand.Rand) {
	pace := time.Duration(20+rng.IntN(80)) * time.Millisecond
	backoff := retry.Backoff{Steps: 1 + rng.IntN(3), Duration: 10 * time.Millisecond}
	for ctx.Err() == nil {
		attempt := 0
		_, err := retry.OnErrorValue(ctx, backoff, retry.IsTransient, func(context.Context) (int, error) {
			attempt++
			now := s.clk.Now()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.attempts++
			if attempt == 1 {
				s.firstCount++
			} else {
				s.retries++
			}
			switch {
			case s.isDown(now):
				if attempt == 1 {
					s.firsts = append(s.firsts, now)
				}
				return 0, errDown
			case !now.Before(s.up):
				s.successes = append(s.successes, now)
			}
			return 1, nil
		}, retry.WithBudget(s.budget), retry.WithSleeper(&fakeSleeper{hook: func(d time.Duration) { <-s.clk.After(d) }}))
		if errors.Is(err, retry.ErrBudgetExhausted) && ctx.Err() == nil {
			s.mu.Lock()
			s.refusals = append(s.refusals, s.clk.Now())
			s.mu.Unlock()
		}
		d := pace
		if err != nil {
			d = 10 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-s.clk.After(d):
		}
	}
}

// holdStart is when the contract says the hold starts: the first refusal
// during the outage, or the third of three transient first-attempt
// failures within 10*Hold, whichever comes first.
func (s *outageSim) holdStart() time.Time {
	start := s.up
	if len(s.refusals) > 0 {
		start = s.refusals[0]
	}
	for i := 2; i < len(s.firsts); i++ {
		if s.firsts[i].Sub(s.firsts[i-2]) < 10*s.budget.Hold {
			if s.firsts[i].Before(start) {
				start = s.firsts[i]
			}
			break
		}
	}
	return start
}

// TestHoldOverRandomOutages is the property test of the hold: over random
// Holds, numbers of workers, backoffs and outages, on a fake clock (run
// it with -race): nothing waits while the server is healthy; once the
// hold starts, first attempts during the outage are probes, at least half
// of Hold apart (the shortest jittered wait) and at most the longest
// interval (plus a worker's pause) apart;
// the first probe after the outage succeeds within the longest interval;
// Stats agrees with what the workers saw.
func TestHoldOverRandomOutages(t *testing.T) {
	t.Parallel()
	iterations := 16
	if testing.Short() {
		iterations = 4
	}
	holds := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond}
	const quantum = 10 * time.Millisecond
	allProbes := 0
	defer func() {
		t.Logf("%d probes in %d outages", allProbes, iterations)
		assert.Greater(t, allProbes, 3*iterations, "the outages must be long enough to probe several times")
	}()
	for i := range iterations {
		rng := rand.New(rand.NewPCG(uint64(i), 20))
		hold := holds[rng.IntN(len(holds))]
		limit := max(min(5*hold, time.Second), hold)
		clk := testingclock.NewFakeClock(t0)
		s := &outageSim{
			clk:    clk,
			budget: &retry.Budget{Ratio: 0.1, MinPerSecond: 1, Window: 3 * time.Second, Hold: hold, Clock: clk, Rand: rng.Float64},
			down:   t0.Add(time.Duration(50+rng.IntN(150)) * quantum),
		}
		s.up = s.down.Add(time.Duration(100+rng.IntN(300)) * quantum)
		end := s.up.Add(3 * time.Second)
		workers := 2 + rng.IntN(5)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range workers {
			wrng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			wgGo(&wg, func() { s.worker(ctx, wrng) })
		}
		var atDown retry.BudgetStats
		for clk.Now().Before(end) {
			awaitWaiters(t, clk, workers)
			if clk.Now().Equal(s.down) {
				atDown = s.budget.Stats()
			}
			clk.Step(quantum)
		}
		awaitWaiters(t, clk, workers)
		stats := s.budget.Stats()
		cancel()
		wg.Wait()

		name := fmt.Sprintf("iteration %d (Hold %v, %d workers, outage %v-%v)", i, hold, workers, s.down.Sub(t0), s.up.Sub(t0))
		assert.Zero(t, atDown.Held+atDown.Refused+atDown.Probes, "%s: the healthy phase met the hold: %+v", name, atDown)
		start := s.holdStart()
		require.True(t, start.Before(s.up), "%s: no hold started during the outage", name)
		var probes []time.Time
		for _, at := range s.firsts {
			if at.After(start) {
				probes = append(probes, at)
			}
		}
		for j := 1; j < len(probes); j++ {
			gap := probes[j].Sub(probes[j-1])
			assert.GreaterOrEqual(t, gap, hold/2, "%s: probes %v and %v", name, probes[j-1].Sub(t0), probes[j].Sub(t0))
			assert.LessOrEqual(t, gap, limit+10*quantum, "%s: probes %v and %v", name, probes[j-1].Sub(t0), probes[j].Sub(t0))
		}
		if len(probes) > 0 {
			assert.GreaterOrEqual(t, probes[0].Sub(start), hold/2, "%s: the first probe", name)
		}
		allProbes += len(probes)
		require.NotEmpty(t, s.successes, name)
		assert.LessOrEqual(t, s.successes[0].Sub(s.up), limit+10*quantum, "%s: found back at %v", name, s.successes[0].Sub(t0))
		assert.Equal(t, uint64(s.firstCount), stats.FirstAttempts, name)
		assert.Equal(t, uint64(s.retries), stats.Retries, name)
		assert.Equal(t, uint64(len(s.refusals)), stats.Refused, name)
		assert.GreaterOrEqual(t, stats.Probes, uint64(len(probes)), name)
		assert.Positive(t, stats.Held, name)
		if t.Failed() {
			return
		}
	}
}
