package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
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

// budgetLog is the tests' own account of what a Budget granted: the times
// of first attempts and retries, each at the latest clock reading so far,
// and the bound of the contract computed from them.
type budgetLog struct {
	ratio, min float64
	window     time.Duration
	now        time.Time   // the latest reading of the Budget's clock
	firsts     []time.Time // in order, as now never goes back
	retries    []time.Time
}

// read is a reading t of the Budget's clock.
func (l *budgetLog) read(t time.Time) {
	if t.After(l.now) {
		l.now = t
	}
}

// within counts the entries of ts whose age at l.now is below max (or at
// most max, when inclusive).
func (l *budgetLog) within(ts []time.Time, max time.Duration, inclusive bool) int {
	i := sort.Search(len(ts), func(i int) bool {
		age := l.now.Sub(ts[i])
		return age < max || inclusive && age == max
	})
	return len(ts) - i
}

// bound is floor(MinPerSecond*Window.Seconds() + Ratio*firsts).
func (l *budgetLog) bound(firsts int) int {
	return int(math.Floor(l.min*l.window.Seconds() + l.ratio*float64(firsts)))
}

// exceeded returns an error when the retries of the last Window (an entry
// at t counts over [t, t+Window)) pass the bound from the first attempts of
// the last Window.
func (l *budgetLog) exceeded() error {
	r, f := l.within(l.retries, l.window, false), l.within(l.firsts, l.window, false)
	if r > l.bound(f) {
		return fmt.Errorf("%d retries in the Window before %v, bound %d from %d first attempts", r, l.now, l.bound(f), f)
	}
	return nil
}

// refusable returns an error when the budget had to grant the retry it
// refused: even with every retry counted Window/10 late and every first
// attempt stopping Window/10 early, there was room for it. window must be
// a multiple of 10ns.
func (l *budgetLog) refusable() error {
	r := l.within(l.retries, l.window+l.window/10, false)
	f := l.within(l.firsts, l.window-l.window/10, true)
	if r+1 <= l.bound(f) {
		return fmt.Errorf("refused at %v with at most %d retries and at least %d first attempts counted, bound %d", l.now, r, f, l.bound(f))
	}
	return nil
}

// budgetSim drives loops on one Budget from one goroutine: while a loop
// waits, its Sleeper advances the fake clock by the wait and runs more of
// the schedule (clock steps, new calls, which may wait in turn), so calls
// interleave as they would across goroutines. It checks the bound at every
// granted retry, and that every refusal was allowed.
type budgetSim struct {
	t       *testing.T
	rng     *rand.Rand
	clk     *testingclock.FakeClock
	budget  *retry.Budget
	log     budgetLog
	actions int // left to run
	depth   int // calls waiting in a Sleeper
	grants  int
	refused int
	failed  bool
}

// step moves the clock: mostly forward by up to a third of a Window, but
// also not at all, back, or far forward.
func (s *budgetSim) step() {
	w := int64(s.log.window)
	switch p := s.rng.IntN(100); {
	case p < 50:
		s.clk.Step(time.Duration(s.rng.Int64N(w/3 + 1)))
	case p < 70:
		s.clk.Step(-time.Duration(s.rng.Int64N(2*w) + 1))
	case p < 85:
		s.clk.Step(time.Duration(w/10) * time.Duration(s.rng.IntN(30)+1))
	case p < 98:
		s.clk.Step(time.Duration(w) * time.Duration(s.rng.IntN(50)+1))
	default: // decades to centuries
		s.clk.SetTime(s.clk.Now().AddDate(10+s.rng.IntN(400), 0, 0))
	}
}

// call makes one loop call whose fn fails a random number of times.
func (s *budgetSim) call() {
	failures := s.rng.IntN(8)
	attempts := 0
	backoff := retry.Backoff{Steps: 1 + s.rng.IntN(10), Duration: time.Duration(s.rng.Int64N(int64(s.log.window)/4 + 1)), Factor: 1.5}
	s.depth++
	err := retry.OnError(backoff, always, func() error {
		attempts++
		if attempts == 1 { // deposited just before this call, at this time
			s.log.read(s.clk.Now())
			s.log.firsts = append(s.log.firsts, s.log.now)
		}
		if attempts > failures {
			return nil
		}
		return errDown
	}, retry.WithBudget(s.budget), retry.WithSleeper(&fakeSleeper{hook: func(d time.Duration) {
		s.clk.Step(d)
		s.run()
	}}), retry.WithOnRetry(func(e retry.RetryEvent) {
		if e.Final {
			return
		}
		// Granted at the clock's time when fn returned: nothing moved it.
		s.log.read(s.clk.Now())
		s.log.retries = append(s.log.retries, s.log.now)
		s.grants++
		if err := s.log.exceeded(); err != nil && !s.failed {
			s.failed = true
			s.t.Errorf("granted beyond the bound: %v", err)
		}
	}))
	s.depth--
	if errors.Is(err, retry.ErrBudgetExhausted) {
		s.log.read(s.clk.Now())
		s.refused++
		if err := s.log.refusable(); err != nil && !s.failed {
			s.failed = true
			s.t.Errorf("refused within the bound: %v", err)
		}
		if !errors.Is(err, errDown) && !s.failed {
			s.failed = true
			s.t.Errorf("a refusal does not wrap the last error: %v", err)
		}
	}
}

// run runs the schedule until it ends or, inside a wait, until the waiting
// loop's turn comes.
func (s *budgetSim) run() {
	for s.actions > 0 {
		s.actions--
		switch p := s.rng.IntN(100); {
		case p < 30:
			s.step()
		case p < 75 && s.depth < 6:
			s.call()
		case s.depth > 0:
			return // the waiting loop makes its next attempt
		default:
			s.call()
		}
	}
}

// TestBudgetBoundOverRandomSchedules is the property test: over random
// budgets and schedules of first attempts, failures and clock steps (back,
// and far forward too), no granted retry takes the retries of the last
// Window past the bound computed from the test's own log, and no refused
// one had room.
func TestBudgetBoundOverRandomSchedules(t *testing.T) {
	t.Parallel()
	iterations := 400
	if testing.Short() {
		iterations = 50
	}
	ratios := []float64{0, 0.1, 0.2, 0.5, 1, 3}
	mins := []float64{0, 0.2, 1, 4}
	windows := []time.Duration{10, 1000, time.Millisecond, time.Second, 5 * time.Second, 10 * time.Second, time.Hour}
	var grants, refused int
	for i := range iterations {
		rng := rand.New(rand.NewPCG(uint64(i), 14))
		clk := testingclock.NewFakeClock(t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
		log := budgetLog{ratio: ratios[rng.IntN(len(ratios))], min: mins[rng.IntN(len(mins))], window: windows[rng.IntN(len(windows))]}
		s := &budgetSim{t: t, rng: rng, clk: clk, log: log, actions: 300,
			budget: &retry.Budget{Ratio: log.ratio, MinPerSecond: log.min, Window: log.window, Clock: clk}}
		s.run()
		grants += s.grants
		refused += s.refused
		if s.failed {
			t.Logf("iteration %d: Ratio %v, MinPerSecond %v, Window %v", i, log.ratio, log.min, log.window)
			return
		}
	}
	t.Logf("%d retries granted, %d refused", grants, refused)
	// The schedules must reach the bound often, or the test proves little.
	assert.Greater(t, grants, 10*iterations)
	assert.Greater(t, refused, 5*iterations)
}

// TestBudgetConcurrentLoops: 8 goroutines share one Budget (run it with
// -race). The clock moves between rounds, back too, while no loop runs, so
// every entry of a round has the round's time. The log takes each first
// attempt before its loop deposits it and each retry after the budget
// granted it, so at every logged retry the log holds at least the first
// attempts the budget had seen and at most the retries it had granted:
// the bound checked from the log then holds whatever the interleaving.
func TestBudgetConcurrentLoops(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{Ratio: 0.2, MinPerSecond: 1, Window: window, Clock: clk}
	var (
		mu      sync.Mutex
		log     = budgetLog{ratio: b.Ratio, min: b.MinPerSecond, window: window}
		grants  int
		refused int
	)
	rng := rand.New(rand.NewPCG(8, 14))
	for round := range 60 {
		switch p := rng.IntN(10); {
		case p < 6:
			clk.Step(time.Duration(rng.Int64N(int64(window / 4))))
		case p < 8:
			clk.Step(-time.Duration(rng.Int64N(int64(2 * window))))
		default:
			clk.Step(window + time.Duration(rng.Int64N(int64(window))))
		}
		log.read(clk.Now())
		var wg sync.WaitGroup
		for g := range 8 {
			wgGo(&wg, func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for range 10 {
					failures := rng.IntN(6)
					attempts := 0
					mu.Lock()
					log.firsts = append(log.firsts, log.now)
					mu.Unlock()
					err := retry.OnError(retry.Backoff{Steps: 8}, always, func() error {
						attempts++
						if attempts > failures {
							return nil
						}
						return errDown
					}, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}), retry.WithOnRetry(func(retry.RetryEvent) {
						mu.Lock()
						defer mu.Unlock()
						log.retries = append(log.retries, log.now)
						grants++
						if err := log.exceeded(); err != nil {
							t.Errorf("round %d: %v", round, err)
						}
					}))
					if errors.Is(err, retry.ErrBudgetExhausted) {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	}
	t.Logf("%d retries granted, %d refused", grants, refused)
	assert.Greater(t, grants, 100)
	assert.Greater(t, refused, 100)
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
			b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: time.Minute, Hold: hold, Clock: clk}
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

func (w *holdWorkers) times() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.sent...)
}

func (w *holdWorkers) end() {
	w.stop()
	w.wg.Wait()
}

// probeSchedule is the contract's probe times from a hold that started at
// start, while every probe fails at once: the first Hold after the start,
// each next one an interval after the previous one, the interval doubling
// after each failed probe up to min(5*Hold, 1s), never below Hold.
func probeSchedule(start time.Time, hold time.Duration, until time.Time) []time.Time {
	limit := max(min(5*hold, time.Second), hold)
	var out []time.Time
	interval := hold
	for at := start.Add(hold); !at.After(until); at = at.Add(interval) {
		out = append(out, at)
		interval = min(2*interval, limit)
	}
	return out
}

// probeGaps is the contract's probe schedule, written out, for the Holds
// it names: NewBudget's 100ms (0.1, 0.2, 0.4, then 0.5s: 5 x Hold) and
// 300ms (0.3, 0.6, then 1s: 5 x Hold is 1.5s, above the 1s cap).
var probeGaps = map[time.Duration][]time.Duration{
	100 * time.Millisecond: {100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
	300 * time.Millisecond: {300 * time.Millisecond, 600 * time.Millisecond, time.Second, time.Second, time.Second},
}

// TestHoldProbeSchedule: while every probe fails at once, probes go one
// at a time at the contract's times; the other callers wait throughout.
func TestHoldProbeSchedule(t *testing.T) {
	t.Parallel()
	for _, hold := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
		t.Run(hold.String(), func(t *testing.T) {
			t.Parallel()
			clk, b := onHold(t, hold)
			const n = 3
			w := startWorkers(clk, b, n, func(int) error { return errDown })
			defer w.end()
			quantum := min(hold/2, 50*time.Millisecond)
			until := t0.Add(12 * max(hold, time.Second))
			for clk.Now().Before(until) {
				awaitWaiters(t, clk, n)
				clk.Step(quantum)
			}
			awaitWaiters(t, clk, n)
			want := probeSchedule(t0, hold, until)
			require.Greater(t, len(want), 8)
			assert.Equal(t, want, w.times())
			assert.Equal(t, uint64(len(want)), b.Stats().Probes)
			if gaps, ok := probeGaps[hold]; ok {
				got := w.times()
				for i, gap := range gaps {
					prev := t0
					if i > 0 {
						prev = got[i-1]
					}
					assert.Equal(t, gap, got[i].Sub(prev), "probe %d", i+1)
				}
			}
			// Every call waited, once however often it woke: each probe, and
			// the n calls waiting now.
			assert.Equal(t, uint64(len(want)+n), b.Stats().Held)
		})
	}
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

// TestHoldProbeEndedByItsContext: a probe that its own context ended (its
// caller gave up) said nothing about the server: it frees the slot, the
// next probe goes an interval after it, and the interval stays as it was.
func TestHoldProbeEndedByItsContext(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	const n = 2
	w := startWorkers(clk, b, n, func(call int) error {
		if call == 1 {
			return context.Canceled
		}
		return errDown
	})
	defer w.end()
	for clk.Now().Before(t0.Add(4 * hold)) {
		awaitWaiters(t, clk, n)
		clk.Step(hold / 2)
	}
	awaitWaiters(t, clk, n)
	// 100ms: ended by its context; 200ms: fails, the interval doubles; 400ms.
	assert.Equal(t, []time.Time{t0.Add(hold), t0.Add(2 * hold), t0.Add(4 * hold)}, w.times())
}

// TestHoldProbeWithoutAnswer: a probe without an answer after the
// interval counts as failed and the next probe goes; the first one's late
// success still ends the hold and lets every waiting call go.
func TestHoldProbeWithoutAnswer(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	answer := make(chan error)
	up := false
	var upMu sync.Mutex
	const n = 4
	w := startWorkers(clk, b, n, func(call int) error {
		if call == 1 {
			return <-answer // the first probe hangs
		}
		upMu.Lock()
		defer upMu.Unlock()
		if up {
			return nil
		}
		return errDown
	})
	defer w.end()
	awaitWaiters(t, clk, n)
	clk.Step(hold) // the first probe goes, and hangs
	awaitWaiters(t, clk, n-1)
	clk.Step(hold - time.Millisecond)
	awaitWaiters(t, clk, n-1)
	require.Len(t, w.times(), 1, "one probe at a time")
	clk.Step(time.Millisecond) // no answer within the interval: the next goes, and fails
	awaitWaiters(t, clk, n-1)
	// The interval doubled twice (the silent probe, then the failed one):
	// the next is due 400ms after the second.
	clk.Step(399 * time.Millisecond)
	awaitWaiters(t, clk, n-1)
	require.Equal(t, []time.Time{t0.Add(hold), t0.Add(2 * hold)}, w.times())

	upMu.Lock()
	up = true
	upMu.Unlock()
	answer <- nil // the first probe's late success
	// Every waiting call goes without the clock moving.
	await(t, func() bool { return len(w.times()) >= 2+n }, "the waiting calls did not go")
	for _, at := range w.times()[2:] {
		assert.Equal(t, t0.Add(599*time.Millisecond), at)
	}
}

// TestHoldProbePanics: a probe's panic reaches its caller unchanged, and
// the probe counts as failed: the next goes an interval later.
func TestHoldProbePanics(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_ = retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 3}, retry.IsTransient,
			func(context.Context) error { panic("probe panics") }, retry.WithBudget(b))
	}()
	awaitWaiters(t, clk, 1)
	clk.Step(hold)
	assert.Equal(t, "probe panics", <-recovered)
	w := startWorkers(clk, b, 1, func(int) error { return nil })
	defer w.end()
	awaitWaiters(t, clk, 1)
	clk.Step(2*hold - time.Millisecond)
	awaitWaiters(t, clk, 1)
	assert.Empty(t, w.times(), "the slot is free, but the next probe is due 200ms after the first")
	clk.Step(time.Millisecond)
	await(t, func() bool { return len(w.times()) > 0 }, "no probe went")
	assert.Equal(t, t0.Add(3*hold), w.times()[0])
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
	b := &retry.Budget{MinPerSecond: 1, Window: 10 * time.Second, Hold: 100 * time.Millisecond, Clock: clk}
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
	b := &retry.Budget{Window: time.Minute, Hold: time.Millisecond, Clock: testingclock.NewFakePassiveClock(t0)}
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
