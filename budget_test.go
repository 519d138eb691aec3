package retry_test

// The Budget's fields, NewBudget, and the retry window as the loops meet
// it: what a loop deposits and withdraws, when a retry is refused; the
// success path's cost. The window's own: budget_window_test.go.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// budgetRun is one loop call on a budget whose fn fails every time: it
// returns the retries the budget granted (OnRetry calls) and the error.
func budgetRun(b *retry.Budget, steps int) (retries int, err error) {
	err = retry.OnError(retry.Backoff{Steps: steps}, always, func() error { return errDown },
		retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}),
		retry.WithOnRetry(func(retry.RetryEvent) { retries++ }))
	return retries, err
}

// firstAttempts deposits n first attempts in b: n calls that succeed at once.
func firstAttempts(t *testing.T, b *retry.Budget, n int) {
	t.Helper()
	for range n {
		require.NoError(t, retry.OnError(retry.DefaultRetry, always, func() error { return nil }, retry.WithBudget(b)))
	}
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	valid := []*retry.Budget{
		{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second},
		{Window: time.Nanosecond}, // no retry at all, but a valid choice
		{Ratio: math.MaxFloat64, MinPerSecond: math.MaxFloat64, Window: time.Duration(math.MaxInt64)},
		{Window: time.Second, Hold: time.Nanosecond},
		{Window: time.Second, Hold: time.Duration(math.MaxInt64)},
		retry.NewBudget(),
	}
	for _, b := range valid {
		assert.NoError(t, b.Validate(), "%+v", b)
	}

	tests := []struct {
		name  string
		edit  func(*retry.Budget)
		names []string // what the message must name: field and value
	}{
		{"negative Ratio", func(b *retry.Budget) { b.Ratio = -0.5 }, []string{"Ratio -0.5"}},
		{"NaN Ratio", func(b *retry.Budget) { b.Ratio = math.NaN() }, []string{"Ratio NaN"}},
		{"+Inf Ratio", func(b *retry.Budget) { b.Ratio = math.Inf(1) }, []string{"Ratio +Inf"}},
		{"-Inf Ratio", func(b *retry.Budget) { b.Ratio = math.Inf(-1) }, []string{"Ratio -Inf"}},
		{"negative MinPerSecond", func(b *retry.Budget) { b.MinPerSecond = -1 }, []string{"MinPerSecond -1"}},
		{"NaN MinPerSecond", func(b *retry.Budget) { b.MinPerSecond = math.NaN() }, []string{"MinPerSecond NaN"}},
		{"+Inf MinPerSecond", func(b *retry.Budget) { b.MinPerSecond = math.Inf(1) }, []string{"MinPerSecond +Inf"}},
		{"-Inf MinPerSecond", func(b *retry.Budget) { b.MinPerSecond = math.Inf(-1) }, []string{"MinPerSecond -Inf"}},
		{"zero Window", func(b *retry.Budget) { b.Window = 0 }, []string{"Window 0s"}},
		{"negative Window", func(b *retry.Budget) { b.Window = -time.Second }, []string{"Window -1s"}},
		{"every field", func(b *retry.Budget) { b.Ratio, b.MinPerSecond, b.Window = -1, math.NaN(), -time.Millisecond },
			[]string{"Ratio -1", "MinPerSecond NaN", "Window -1ms"}},
		{"zero Budget", func(b *retry.Budget) { b.Ratio, b.MinPerSecond, b.Window = 0, 0, 0 }, []string{"Window 0s"}},
		{"negative Hold", func(b *retry.Budget) { b.Hold = -time.Millisecond }, []string{"Hold -1ms"}},
		{"most negative Hold", func(b *retry.Budget) { b.Hold = math.MinInt64 }, []string{"Hold -2562047h47m16.854775808s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &retry.Budget{Ratio: 0.1, MinPerSecond: 1, Window: 5 * time.Second}
			require.NoError(t, b.Validate())
			tt.edit(b)
			err := b.Validate()
			require.ErrorIs(t, err, retry.ErrInvalidBudget)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			for _, s := range tt.names {
				assert.Contains(t, err.Error(), s)
			}
		})
	}

	var nilBudget *retry.Budget
	err := nilBudget.Validate()
	require.ErrorIs(t, err, retry.ErrInvalidBudget)
	assert.Contains(t, err.Error(), "nil")
}

// TestNewBudget: a valid budget with a hold, a new one at each call, whose
// floor is below Finagle's 100 retries a Window, which alone exceeds a
// controller's whole load through an outage.
func TestNewBudget(t *testing.T) {
	t.Parallel()
	b := retry.NewBudget()
	require.NoError(t, b.Validate())
	assert.Positive(t, b.Hold)
	assert.Nil(t, b.Clock, "real time")
	assert.NotSame(t, b, retry.NewBudget())
	finagle := &retry.Budget{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}
	assert.Less(t, b.MinPerSecond*b.Window.Seconds(), finagle.MinPerSecond*finagle.Window.Seconds())

	// A quiet controller's lone call may retry the Conflicts of
	// DefaultBackoff's 4 attempts.
	s := conflicts(3)
	s.errs = append(s.errs, nil)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultBackoff, s.fn, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{})))
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 1, Retries: 3}, b.Stats())
}

// TestNewBudgetClientGoResends: with NewBudget's Window, the resend
// client-go makes 1s after a reset GET is a first attempt, which waits
// during a hold; one it makes at once, after a Retry-After of 0, is a
// retry.
func TestNewBudgetClientGoResends(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := retry.NewBudget()
	b.Clock = clk
	w := &wire{replies: []wireReply{{err: errReset}, {status: 200}, {status: 503, retryAfter: "0"}, {status: 200}}}
	rt := b.WrapTransport(w)
	_ = roundTrip(t, rt, http.MethodGet, apiURL)
	clk.Step(time.Second) // client-go's wait after a reset GET
	require.NoError(t, roundTrip(t, rt, http.MethodGet, apiURL))
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 2}, b.Stats())
	_ = roundTrip(t, rt, http.MethodGet, apiURL)
	require.NoError(t, roundTrip(t, rt, http.MethodGet, apiURL))
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 3, Retries: 1}, b.Stats())
}

// TestBudgetInvalidStopsEveryLoop: an invalid or nil Budget makes every
// loop return Validate's error at once: nothing called, nothing slept, no
// hook, no OnDone.
func TestBudgetInvalidStopsEveryLoop(t *testing.T) {
	t.Parallel()
	budgets := map[string]*retry.Budget{
		"nil":             nil,
		"zero":            {},
		"NaN Ratio":       {Ratio: math.NaN(), Window: time.Second},
		"negative Min":    {MinPerSecond: -2, Window: time.Second},
		"negative Window": {Ratio: 0.1, Window: -time.Second},
		"negative Hold":   {Ratio: 0.1, Window: time.Second, Hold: -time.Second},
	}
	for name, b := range budgets {
		for loop, run := range everyLoop() {
			t.Run(name+"/"+loop, func(t *testing.T) {
				t.Parallel()
				var h hooks
				err := run(&h, retry.WithBudget(b))
				require.ErrorIs(t, err, retry.ErrInvalidBudget)
				assert.Equal(t, b.Validate().Error(), err.Error())
				assert.Zero(t, h.calls, "nothing may be called")
				assert.Empty(t, h.waits)
				assert.Zero(t, h.retries)
				assert.Empty(t, h.done, "no OnDone for an invalid argument")
			})
		}
	}

	// Options apply in order: a later WithBudget replaces an earlier one.
	var h hooks
	good := &retry.Budget{MinPerSecond: 1, Window: time.Second}
	h.succeedAt = 1
	require.NoError(t, everyLoop()["OnError"](&h, retry.WithBudget(nil), retry.WithBudget(good)))
	err := everyLoop()["OnError"](&h, retry.WithBudget(good), retry.WithBudget(nil))
	require.ErrorIs(t, err, retry.ErrInvalidBudget)
}

// TestBudgetBoundAtItsLimit: with MinPerSecond 1, Window 5s and Ratio 0.1,
// n first attempts allow exactly floor(5 + n/10) retries in a Window (0.1
// is above a tenth in float64, so 0.1*n never rounds below n/10): that
// retry is granted, the next refused.
func TestBudgetBoundAtItsLimit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 9, 10, 11, 19, 20, 49, 50, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := &retry.Budget{Ratio: 0.1, MinPerSecond: 1, Window: 5 * time.Second, Clock: clk}
			firstAttempts(t, b, n-1) // the loop below makes the n-th
			want := 5 + n/10
			retries, err := budgetRun(b, 10_000)
			assert.Equal(t, want, retries)
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			assert.Contains(t, err.Error(), fmt.Sprintf("after %d attempts", want+1))

			// Later loops in the same Window are refused at once, until
			// their own first attempts take floor(0.1*n) up by one: the loop
			// that makes the first attempts a multiple of 10 gets one retry.
			next := (n/10 + 1) * 10
			for firsts := n + 1; firsts < next; firsts++ {
				retries, err := budgetRun(b, 10_000)
				require.ErrorIs(t, err, retry.ErrBudgetExhausted, firsts)
				assert.Zero(t, retries, firsts)
			}
			retries, err = budgetRun(b, 10_000)
			assert.Equal(t, 1, retries, "the %d-th first attempt adds a retry", next)
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
		})
	}
}

// TestBudgetMinPerSecondAlone: with Ratio 0 the budget grants
// floor(MinPerSecond*Window) retries per Window, however many first
// attempts there were.
func TestBudgetMinPerSecondAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		min    float64
		window time.Duration
		want   int
	}{
		{2, 3 * time.Second, 6},
		{0.5, 3 * time.Second, 1},
		{0.3, 3 * time.Second, 0}, // floor(0.9)
		{10, 10 * time.Second, 100},
		{1, 2500 * time.Millisecond, 2},
		{0, time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.min, "/s over ", tt.window), func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := &retry.Budget{MinPerSecond: tt.min, Window: tt.window, Clock: clk}
			firstAttempts(t, b, 500)
			retries, err := budgetRun(b, 10_000)
			assert.Equal(t, tt.want, retries)
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
			// A new Window grants as many again, no more.
			clk.Step(tt.window + tt.window/10)
			retries, _ = budgetRun(b, 10_000)
			assert.Equal(t, tt.want, retries)
		})
	}
}

// TestBudgetRetriesExpireAfterTheWindow: a retry counts from t until
// t+Window, and may count up to Window/10 later, not longer.
func TestBudgetRetriesExpireAfterTheWindow(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	// The sub-windows start at the Budget's first reading; shifting it
	// moves their edges against the times below.
	for _, shift := range []time.Duration{0, 1, 170 * time.Millisecond, 499 * time.Millisecond, 3 * time.Second} {
		t.Run(shift.String(), func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0.Add(-shift - 3*window))
			b := &retry.Budget{MinPerSecond: 1, Window: window, Clock: clk} // 5 retries
			firstAttempts(t, b, 1)                                          // the first reading
			clk.SetTime(t0)
			retries, err := budgetRun(b, 100)
			require.Equal(t, 5, retries)
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)

			clk.SetTime(t0.Add(window - 1))
			retries, err = budgetRun(b, 100)
			assert.Zero(t, retries, "the retries at t0 count until t0+Window")
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

			clk.SetTime(t0.Add(window + window/10))
			retries, _ = budgetRun(b, 100)
			assert.Equal(t, 5, retries, "the retries at t0 count no later than t0+1.1*Window")
		})
	}
}

// TestBudgetFirstAttemptsExpire: a first attempt counts from t until
// t+Window, and may stop counting up to Window/10 early, not earlier, and
// never later.
func TestBudgetFirstAttemptsExpire(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	tests := []struct {
		at   time.Duration // after the 9 first attempts at t0
		want int           // retries granted with Ratio 1: first attempts counted
	}{
		{0, 10},
		{window - window/10, 10},
		{window, 1}, // only the loop's own first attempt
		{2 * window, 1},
	}
	for _, shift := range []time.Duration{0, 1, 250 * time.Millisecond, 499 * time.Millisecond} {
		for _, tt := range tests {
			t.Run(fmt.Sprint(shift, "/", tt.at), func(t *testing.T) {
				t.Parallel()
				clk := testingclock.NewFakeClock(t0.Add(-shift - 3*window))
				b := &retry.Budget{Ratio: 1, Window: window, Clock: clk}
				firstAttempts(t, b, 1) // the first reading, long expired at t0
				clk.SetTime(t0)
				firstAttempts(t, b, 9)
				clk.SetTime(t0.Add(tt.at))
				retries, err := budgetRun(b, 100)
				assert.Equal(t, tt.want, retries)
				assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
			})
		}
	}
}

// TestBudgetRefusalReturnsAtOnce: a refused retry ends the loop without a
// wait or an OnRetry, with an error that matches ErrBudgetExhausted and the
// last attempt's error, in every loop.
func TestBudgetRefusalReturnsAtOnce(t *testing.T) {
	t.Parallel()
	for loop, run := range everyLoop() {
		for _, granted := range []int{0, 2} {
			t.Run(fmt.Sprint(loop, "/", granted), func(t *testing.T) {
				t.Parallel()
				clk := testingclock.NewFakeClock(t0)
				// floor(0.5 * 4s) = 2 retries, or none.
				b := &retry.Budget{MinPerSecond: 0.5 * float64(granted/2), Window: 4 * time.Second, Clock: clk}
				var h hooks
				err := run(&h, retry.WithBudget(b))
				require.ErrorIs(t, err, retry.ErrBudgetExhausted)
				require.Len(t, h.errs, granted+1)
				last := h.errs[granted]
				assert.ErrorIs(t, err, last, "the last attempt's error is wrapped")
				assert.True(t, apierrors.IsConflict(err))
				assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
				assert.Contains(t, err.Error(), last.Error())
				assert.Equal(t, granted, h.retries, "no OnRetry for the refused retry")
				assert.Len(t, h.waits, granted, "no wait for the refused retry")
				require.Len(t, h.done, 1)
				assert.Equal(t, retry.DoneEvent{Attempts: granted + 1, Err: err}, h.done[0])
			})
		}
	}
}

// TestBudgetNoDepositWithoutAnAttempt: a loop whose ctx is done before
// its first attempt deposits nothing.
func TestBudgetNoDepositWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	b := &retry.Budget{Ratio: 1, Window: time.Second, Clock: testingclock.NewFakeClock(t0)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, always, func(context.Context) error { return nil }, retry.WithBudget(b))
		require.ErrorIs(t, err, context.Canceled)
	}
	retries, err := budgetRun(b, 10)
	assert.Equal(t, 1, retries, "only the loop's own first attempt counts")
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
}

// TestBudgetCappedFinalWaitWithdrawsNothing: the wait after the step that
// reached Cap leads to no attempt, so it takes no retry from the budget.
func TestBudgetCappedFinalWaitWithdrawsNothing(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{MinPerSecond: 0.2, Window: 5 * time.Second, Clock: clk} // one retry
	// Steps 1s, 2s; the third step (4s) passes the Cap: its wait of 2s is
	// the final one.
	capped := retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2, Cap: 3 * time.Second}
	s := conflicts(10)
	var events []retry.RetryEvent
	err := retry.RetryOnConflict(capped, s.fn, retry.WithBudget(b), retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
	assert.Same(t, s.errs[1], err, "exhausted at the Cap, not refused by the budget")
	require.Len(t, events, 2)
	assert.False(t, events[0].Final)
	assert.True(t, events[1].Final, "the second wait is the capped final one")
	assert.Equal(t, t0.Add(3*time.Second), clk.Now())

	// The budget's one retry went to the first wait: a new loop is refused.
	retries, err := budgetRun(b, 5)
	assert.Zero(t, retries)
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

	// A loop whose first wait is already the final one takes nothing.
	clk.SetTime(t0.Add(time.Hour))
	s = conflicts(10)
	err = retry.RetryOnConflict(retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2, Cap: time.Second}, s.fn,
		retry.WithBudget(b), retry.WithSleeper(clk))
	assert.Same(t, s.errs[0], err)
	retries, err = budgetRun(b, 5)
	assert.Equal(t, 1, retries, "the retry is still there")
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
}

// TestBudgetWithdrawsAfterContextChecks: a loop that its ctx or deadline
// ends before a wait takes no retry from the budget.
func TestBudgetWithdrawsAfterContextChecks(t *testing.T) {
	t.Parallel()
	oneRetry := func() *retry.Budget {
		return &retry.Budget{MinPerSecond: 0.2, Window: 5 * time.Second, Clock: testingclock.NewFakeClock(t0)}
	}
	tests := map[string]struct {
		end  func(b *retry.Budget) error
		want error
	}{
		"ctx cancelled during the attempt": {func(b *retry.Budget) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			return retry.OnErrorWithContext(ctx, retry.DefaultRetry, always, func(context.Context) error {
				cancel()
				return errDown
			}, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
		}, context.Canceled},
		"wait past the deadline": {func(b *retry.Budget) error {
			// The default sleeper does not start a wait that would outlast
			// the deadline: no real sleep happens here.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			return retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 3, Duration: 2 * time.Hour}, always,
				func(context.Context) error { return errDown }, retry.WithBudget(b))
		}, context.DeadlineExceeded},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := oneRetry()
			err := tt.end(b)
			require.ErrorIs(t, err, tt.want)
			assert.NotErrorIs(t, err, retry.ErrBudgetExhausted)
			retries, _ := budgetRun(b, 5)
			assert.Equal(t, 1, retries, "the retry is still in the budget")
		})
	}

	// The control: without the ctx ending it, such a loop takes the retry.
	b := oneRetry()
	err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 2}, always,
		func(context.Context) error { return errDown }, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
	require.Same(t, errDown, err)
	retries, err := budgetRun(b, 5)
	assert.Zero(t, retries)
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
}

// TestBudgetClockGoingBackwards: a reading earlier than one seen counts as
// that one: no panic, and what was taken at the latest time keeps counting
// until a Window after it.
func TestBudgetClockGoingBackwards(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{MinPerSecond: 1, Window: window, Clock: clk} // 5 retries
	firstAttempts(t, b, 1)

	// The clock goes back an hour, then to before the first reading: the
	// retries taken then count at t0.
	clk.SetTime(t0.Add(-time.Hour))
	retries, err := budgetRun(b, 3) // 2 retries
	assert.Equal(t, 2, retries)
	assert.Same(t, errDown, err)
	clk.SetTime(t0.Add(-100 * window))
	retries, err = budgetRun(b, 100)
	assert.Equal(t, 3, retries)
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

	// At the clock's own time, an hour and a Window after those readings,
	// they still count: their time was t0.
	clk.SetTime(t0.Add(window - 1))
	retries, err = budgetRun(b, 100)
	assert.Zero(t, retries)
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

	clk.SetTime(t0.Add(window + window/10))
	retries, _ = budgetRun(b, 100)
	assert.Equal(t, 5, retries)

	// First attempts made while the clock is behind count at the latest
	// time too, and expire a Window after it.
	late := t0.Add(10 * window)
	clk.SetTime(late)
	rb := &retry.Budget{Ratio: 1, Window: window, Clock: clk}
	firstAttempts(t, rb, 1)
	clk.SetTime(late.Add(-window / 2))
	firstAttempts(t, rb, 5)
	clk.SetTime(late.Add(window))
	retries, _ = budgetRun(rb, 100)
	assert.Equal(t, 1, retries, "the first attempts read at late-Window/2 counted at late")
}

// TestBudgetHugeClockJumps: a jump that now.Sub cannot measure from the
// first reading (over 292 years, as from a FakeClock at the zero time to
// today) or one that overflows the sub-window's number (a Window of a few
// nanoseconds) neither panics nor stops the time: first attempts from
// before the jump no longer count after a Window.
func TestBudgetHugeClockJumps(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		start  time.Time
		jump   time.Time
		window time.Duration
	}{
		"zero time to today": {time.Time{}, t0, time.Second},
		"300 years":          {t0, t0.AddDate(300, 0, 0), time.Minute},
		"1ns Window":         {t0, t0.AddDate(100, 0, 0), time.Nanosecond},
		"7ns Window":         {t0, t0.AddDate(200, 0, 0), 7 * time.Nanosecond},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(tt.start)
			b := &retry.Budget{Ratio: 0.5, Window: tt.window, Clock: clk}
			firstAttempts(t, b, 1)
			clk.SetTime(tt.jump)
			require.NotPanics(t, func() { firstAttempts(t, b, 10) })
			// 11 first attempts in the Window: 5 retries.
			retries, err := budgetRun(b, 100)
			assert.Equal(t, 5, retries)
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

			// A Window later (two, to pass the retries' sub-window too) only
			// the new loop's own first attempt counts: floor(0.5) = 0.
			clk.Step(2 * tt.window)
			retries, err = budgetRun(b, 100)
			assert.Zero(t, retries, "first attempts from before must expire")
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

			// And the time goes on after the jump: two more loops a Window
			// apart each get floor(0.5*2)=1 retry from a pair of calls.
			for range 2 {
				clk.Step(2 * tt.window)
				firstAttempts(t, b, 1)
				retries, _ = budgetRun(b, 100)
				assert.Equal(t, 1, retries)
			}
		})
	}
}

// TestBudgetHugeJumpWithinAWindow: with a Window of a century, the clock
// can pass 292 years after the first reading (where now.Sub saturates)
// while a retry taken 50 years before still counts: it must.
func TestBudgetHugeJumpWithinAWindow(t *testing.T) {
	t.Parallel()
	window := 100 * 365 * 24 * time.Hour
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{MinPerSecond: 1.5 / window.Seconds(), Window: window, Clock: clk} // 1 retry
	firstAttempts(t, b, 1)

	clk.SetTime(t0.AddDate(250, 0, 0))
	retries, err := budgetRun(b, 10)
	require.Equal(t, 1, retries)
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)

	clk.SetTime(t0.AddDate(300, 0, 0))
	retries, err = budgetRun(b, 10)
	assert.Zero(t, retries, "the retry taken 50 years ago counts for 100")
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)

	clk.Step(window + window/10)
	retries, _ = budgetRun(b, 10)
	assert.Equal(t, 1, retries)
}

func TestBudgetAndOnDoneSuccessPathAllocations(t *testing.T) {
	ok := func() error { return nil }
	okCtx := func(context.Context) error { return nil }
	okValue := func(context.Context) (string, error) { return "done", nil }
	ctx := context.Background()
	b := newBudget(nil, finagleLimits, 0)
	var done atomic.Int64
	onDone := func(retry.DoneEvent) { done.Add(1) }

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, ok, retry.WithBudget(b))
		_ = retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, okCtx, retry.WithBudget(b))
		_, _ = retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, okValue, retry.WithBudget(b))
	}), "WithBudget")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, ok, retry.WithOnDone(onDone))
		_ = retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, okCtx, retry.WithOnDone(onDone))
		_, _ = retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, okValue, retry.WithOnDone(onDone))
	}), "WithOnDone")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, ok, retry.WithBudget(b), retry.WithOnDone(onDone), retry.WithFullJitter())
	}), "WithBudget, WithOnDone and WithFullJitter")
	// AllocsPerRun runs each function once more to warm up.
	assert.Equal(t, int64(3*101+101), done.Load(), "OnDone ran once per call")
}

func BenchmarkOnErrorSuccessWithBudget(b *testing.B) {
	b.ReportAllocs()
	budget := newBudget(nil, finagleLimits, 0)
	fn := func() error { return nil }
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn, retry.WithBudget(budget))
	}
	if sink != nil {
		b.Fatal(sink)
	}
}

// BenchmarkOnErrorSuccessWithBudgetParallel shares one Budget between
// GOMAXPROCS goroutines: its mutex is contended.
func BenchmarkOnErrorSuccessWithBudgetParallel(b *testing.B) {
	b.ReportAllocs()
	budget := newBudget(nil, finagleLimits, 0)
	fn := func() error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn, retry.WithBudget(budget)); err != nil {
				b.Error(err)
			}
		}
	})
}
