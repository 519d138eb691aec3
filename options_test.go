package retry_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// counted returns a jitter source that hands out vals in order (then the
// last again) and counts its calls.
func counted(vals ...float64) (func() float64, *int) {
	n := 0
	return func() float64 {
		v := vals[min(n, len(vals)-1)]
		n++
		return v
	}, &n
}

// fraction is the full-jitter wait of a step: r*step.
func fraction(r float64, step time.Duration) time.Duration {
	return time.Duration(r * float64(step))
}

// fullJitterWaits runs RetryOnConflict over conflicts with full jitter and
// opts, sleeping on a fake clock, and returns the waits its OnRetry saw;
// it checks that they are the waits the clock slept.
func fullJitterWaits(t *testing.T, b retry.Backoff, attempts int, opts ...retry.Option) []retry.RetryEvent {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	var events []retry.RetryEvent
	opts = append([]retry.Option{retry.WithFullJitter(), retry.WithSleeper(clk),
		retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) })}, opts...)
	err := retry.RetryOnConflict(b, conflicts(attempts).fn, opts...)
	require.True(t, apierrors.IsConflict(err), "%v", err)
	var slept time.Duration
	for _, e := range events {
		slept += e.Delay
	}
	assert.Equal(t, slept, clk.Since(t0), "each Delay is the wait slept")
	return events
}

func delays(events []retry.RetryEvent) []time.Duration {
	var out []time.Duration
	for _, e := range events {
		out = append(out, e.Delay)
	}
	return out
}

// TestWithFullJitterIsAFractionOfStep: without Backoff.Jitter, each wait
// is rand*Step(), Step() being apimachinery's wait.Backoff.Step, over
// random backoffs, one draw per wait.
func TestWithFullJitterIsAFractionOfStep(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(15, 1))
	for i := range 300 {
		b := retry.Backoff{
			Steps:    2 + rng.IntN(8),
			Duration: time.Duration(rng.Int64N(int64(time.Second))),
			Factor:   []float64{0, 1, 1.2, 2, 5}[rng.IntN(5)],
			Cap:      []time.Duration{0, 0, 500 * time.Millisecond, 10 * time.Second}[rng.IntN(4)],
		}
		require.True(t, oracleSafe(b))
		fractions := make([]float64, b.Steps)
		for j := range fractions {
			fractions[j] = rng.Float64()
		}
		src, draws := counted(fractions...)
		events := fullJitterWaits(t, b, b.Steps, retry.WithRand(src), retry.WithContinueAtCap())
		steps := oracleSteps(b, b.Steps-1)
		require.Len(t, events, len(steps), "backoff %d: %+v", i, b)
		for j, step := range steps {
			assert.Equal(t, fraction(fractions[j], step), events[j].Delay, "backoff %d: %+v, wait %d", i, b, j)
		}
		assert.Equal(t, len(steps), *draws, "one draw per wait")
	}
}

// TestWithFullJitterAfterStepJitter: with Backoff.Jitter above 0, Step's
// own jitter is drawn first, then the fraction, from the same source.
func TestWithFullJitterAfterStepJitter(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 4, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5}
	// jitter, fraction, jitter, fraction, ...
	draws := []float64{0.2, 0.5, 0.8, 0.25, 0, 0.9}
	src, n := counted(draws...)
	got := delays(fullJitterWaits(t, b, b.Steps, retry.WithRand(src)))

	noJitter := b
	noJitter.Jitter = 0
	var want, swapped []time.Duration
	for i, d := range oracleSteps(noJitter, b.Steps-1) {
		j, f := draws[2*i], draws[2*i+1]
		// wait.Jitter's formula: d + rand*maxFactor*d.
		want = append(want, fraction(f, d+time.Duration(j*b.Jitter*float64(d))))
		swapped = append(swapped, fraction(j, d+time.Duration(f*b.Jitter*float64(d))))
	}
	require.NotEqual(t, want, swapped, "the draws must tell the two orders apart")
	assert.Equal(t, want, got)
	assert.Equal(t, 2*(b.Steps-1), *n, "two draws per wait")
}

// TestWithFullJitterThenServerDelayAndMaxDelay: a server's delay is the
// floor of the jittered wait, and WithMaxDelay bounds the result.
func TestWithFullJitterThenServerDelayAndMaxDelay(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 2, Duration: 10 * time.Second, Factor: 1}
	half := retry.WithRand(func() float64 { return 0.5 }) // 5s
	tests := []struct {
		name     string
		server   time.Duration // 0: none
		maxDelay time.Duration
		want     time.Duration
	}{
		{"fraction only", 0, 0, 5 * time.Second},
		{"server delay shorter", 2 * time.Second, 0, 5 * time.Second},
		{"server delay longer", 8 * time.Second, 0, 8 * time.Second},
		{"server delay longer than Step", 30 * time.Second, 0, 30 * time.Second},
		{"MaxDelay above the fraction", 0, 6 * time.Second, 5 * time.Second},
		{"MaxDelay below the fraction", 0, 3 * time.Second, 3 * time.Second},
		{"MaxDelay bounds the server delay", 8 * time.Second, 6 * time.Second, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := []retry.Option{half, retry.WithMaxDelay(tt.maxDelay)}
			if tt.server > 0 {
				opts = append(opts, retry.WithRetryAfter(func(error) (time.Duration, bool) { return tt.server, true }))
			}
			events := fullJitterWaits(t, b, 2, opts...)
			require.Len(t, events, 1)
			assert.Equal(t, tt.want, events[0].Delay)
			assert.Equal(t, tt.server, events[0].RetryAfter)
		})
	}
}

// TestWithFullJitterAtTheCap: full jitter scales the Cap too, and changes
// neither when the loop ends nor which wait is the final one.
func TestWithFullJitterAtTheCap(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 6, Duration: time.Second, Factor: 3, Cap: 5 * time.Second}
	half := retry.WithRand(func() float64 { return 0.5 })
	steps := oracleSteps(b, 5) // 1s, 3s, then the Cap
	var want []time.Duration
	for _, s := range steps {
		want = append(want, s/2)
	}

	events := fullJitterWaits(t, b, 6, half, retry.WithContinueAtCap())
	assert.Equal(t, want, delays(events))

	events = fullJitterWaits(t, b, 6, half)
	require.Len(t, events, 2, "the step that reaches the Cap ends the loop after its wait")
	assert.Equal(t, want[:2], delays(events))
	assert.True(t, events[1].Final)
}

// TestWithFullJitterClampsTheSource: a value outside [0,1) is clamped, as
// for Step's jitter.
func TestWithFullJitterClampsTheSource(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 2, Duration: time.Second, Factor: 1}
	for _, tt := range []struct {
		r    float64
		want time.Duration
	}{
		{-1, 0},
		{math.NaN(), 0},
		{1, fraction(math.Nextafter(1, 0), time.Second)},
		{7, fraction(math.Nextafter(1, 0), time.Second)},
		{0.75, 750 * time.Millisecond},
	} {
		events := fullJitterWaits(t, b, 2, retry.WithRand(func() float64 { return tt.r }))
		require.Len(t, events, 1)
		assert.Equal(t, tt.want, events[0].Delay, "rand %v", tt.r)
	}
}

// TestWithFullJitterDefaultSource: with math/rand/v2's source the waits
// are spread over [0, Step()): all below it, with a mean near its half.
func TestWithFullJitterDefaultSource(t *testing.T) {
	t.Parallel()
	const n = 400
	b := retry.Backoff{Steps: n + 1, Duration: time.Second, Factor: 1}
	events := fullJitterWaits(t, b, n+1)
	require.Len(t, events, n)
	var sum time.Duration
	for _, e := range events {
		assert.GreaterOrEqual(t, e.Delay, time.Duration(0))
		assert.Less(t, e.Delay, time.Second)
		sum += e.Delay
	}
	// The mean of n uniform fractions has a standard deviation of
	// 0.29/sqrt(n) = 0.014: 0.4 to 0.6 is 7 of them away.
	mean := sum.Seconds() / n
	assert.InDelta(t, 0.5, mean, 0.1)
}

func TestWithRandJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    float64
		want time.Duration
	}{
		{"half", 0.5, 1250 * time.Millisecond},
		{"zero", 0, time.Second},
		{"negative clamps to 0", -3, time.Second},
		{"NaN clamps to 0", math.NaN(), time.Second},
		{"1 clamps below 1", 1, time.Second + time.Duration(math.Nextafter(1, 0)*0.5*float64(time.Second))},
		{"large clamps below 1", 7, time.Second + time.Duration(math.Nextafter(1, 0)*0.5*float64(time.Second))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec fakeSleeper
			b := retry.Backoff{Steps: 3, Duration: time.Second, Factor: 1, Jitter: 0.5}
			err := retry.RetryOnConflict(b, conflicts(3).fn, retry.WithSleeper(&rec), retry.WithRand(func() float64 { return tt.r }))
			require.True(t, apierrors.IsConflict(err))
			assert.Equal(t, []time.Duration{tt.want, tt.want}, rec.waits)
			assert.Less(t, rec.waits[0], 1500*time.Millisecond, "jitter stays below Jitter*Duration")
		})
	}
}

func TestWithRetryAfter(t *testing.T) {
	t.Parallel()
	// The server-delay source: each wait is max(Step(), d) when ok, d
	// negative counting as 0, then WithMaxDelay; the event reports d.
	delays := map[string]struct {
		d  time.Duration
		ok bool
	}{
		"cm-1": {3 * time.Second, true},  // longer than the step: wins
		"cm-2": {time.Second, true},      // shorter: the step wins
		"cm-3": {-5 * time.Second, true}, // negative counts as 0
		"cm-4": {time.Hour, false},       // not ok: ignored
		"cm-5": {10 * time.Minute, true}, // bounded by WithMaxDelay
	}
	source := func(err error) (time.Duration, bool) {
		for name, v := range delays {
			if strings.Contains(err.Error(), `"`+name+`"`) {
				return v.d, v.ok
			}
		}
		t.Errorf("no delay for %v", err)
		return 0, false
	}
	b := retry.Backoff{Steps: 6, Duration: 2 * time.Second, Factor: 1}
	var rec fakeSleeper
	var events []retry.RetryEvent
	s := conflicts(6)
	err := retry.OnError(b, apierrors.IsConflict, s.fn, retry.WithSleeper(&rec), retry.WithRetryAfter(source),
		retry.WithMaxDelay(time.Minute), retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
	assert.Same(t, s.errs[5], err)
	assert.Equal(t, []time.Duration{3 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, time.Minute}, rec.waits)
	var reported []time.Duration
	for _, e := range events {
		reported = append(reported, e.RetryAfter)
	}
	assert.Equal(t, []time.Duration{3 * time.Second, time.Second, 0, 0, 10 * time.Minute}, reported)
}

func TestOnRetryAfterErrorIsOnErrorWithRetryAfter(t *testing.T) {
	t.Parallel()
	errs := []error{throttled(3), serverTimeout(1), throttled(1), nil}
	b := retry.Backoff{Steps: 5, Duration: 2 * time.Second, Factor: 1}
	onRetryAfter := func(opts ...retry.Option) error {
		return retry.OnRetryAfterError(b, retry.IsRetryAfterError, (&script{errs: errs}).fn, opts...)
	}
	onError := func(opts ...retry.Option) error {
		return retry.OnError(b, retry.IsRetryAfterError, (&script{errs: errs}).fn, opts...)
	}
	var rec fakeSleeper
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec)))
	want := rec.waits
	assert.Equal(t, []time.Duration{3 * time.Second, 2 * time.Second, 2 * time.Second}, want, "max(Step, the server's delay)")

	rec = fakeSleeper{}
	require.NoError(t, onError(retry.WithSleeper(&rec), retry.WithRetryAfter(retry.RetryAfter)))
	assert.Equal(t, want, rec.waits, "OnError with WithRetryAfter(RetryAfter) is OnRetryAfterError")

	rec = fakeSleeper{}
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec), retry.WithRetryAfter(func(error) (time.Duration, bool) { return 7 * time.Second, true })))
	assert.Equal(t, []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, rec.waits, "a later WithRetryAfter replaces the preset")

	rec = fakeSleeper{}
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec), retry.WithRetryAfter(func(error) (time.Duration, bool) { return 7 * time.Second, true }), retry.WithRetryAfter(nil)))
	assert.Equal(t, want, rec.waits, "WithRetryAfter(nil) restores OnRetryAfterError's RetryAfter")

	rec = fakeSleeper{}
	require.NoError(t, onError(retry.WithSleeper(&rec), retry.WithRetryAfter(nil)))
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, rec.waits, "WithRetryAfter(nil) on OnError: no server delay")
}

// TestWithRetryAfterCalledWhenNoWaitFollows holds WithRetryAfter's doc: f
// runs once for each retriable error after which the loop may wait (an
// attempt is left, or the final wait at Cap), before ctx and the budget are
// checked, so also when they end the loop instead of a wait; never after
// the last of Steps attempts.
func TestWithRetryAfterCalledWhenNoWaitFollows(t *testing.T) {
	t.Parallel()
	refusing := &retry.Budget{Window: time.Second, Clock: testingclock.NewFakeClock(t0)} // no retry at all
	cases := map[string]struct {
		run       func(ctx context.Context, cancel context.CancelFunc, source retry.Option) error
		wantCalls int
		wantErr   error
	}{
		"last allowed attempt": {
			run: func(_ context.Context, _ context.CancelFunc, source retry.Option) error {
				return retry.OnError(retry.Backoff{Steps: 1}, always, conflicts(1).fn, source)
			},
			wantCalls: 0,
		},
		"a wait follows": {
			run: func(_ context.Context, _ context.CancelFunc, source retry.Option) error {
				return retry.OnError(retry.Backoff{Steps: 2}, always, conflicts(2).fn, source, retry.WithSleeper(&fakeSleeper{}))
			},
			wantCalls: 1,
		},
		"the final wait at Cap": {
			run: func(_ context.Context, _ context.CancelFunc, source retry.Option) error {
				// The first step reaches Cap (the next Duration would pass it): its
				// wait is waited out, and the loop returns after one attempt.
				b := retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2, Cap: 1500 * time.Millisecond}
				return retry.OnError(b, always, conflicts(10).fn, source, retry.WithSleeper(&fakeSleeper{}))
			},
			wantCalls: 1,
		},
		"ctx ends the loop": {
			run: func(ctx context.Context, cancel context.CancelFunc, source retry.Option) error {
				return retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 3}, always, func(context.Context) error {
					cancel()
					return conflict(1)
				}, source, retry.WithSleeper(&fakeSleeper{}))
			},
			wantCalls: 1,
			wantErr:   context.Canceled,
		},
		"the wait would outlast the deadline": {
			run: func(ctx context.Context, _ context.CancelFunc, source retry.Option) error {
				ctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				return retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 3, Duration: 2 * time.Hour}, always,
					func(context.Context) error { return conflict(1) }, source)
			},
			wantCalls: 1,
			wantErr:   context.DeadlineExceeded,
		},
		"a budget refusal": {
			run: func(_ context.Context, _ context.CancelFunc, source retry.Option) error {
				return retry.OnError(retry.Backoff{Steps: 3}, always, conflicts(3).fn, source, retry.WithBudget(refusing))
			},
			wantCalls: 1,
			wantErr:   retry.ErrBudgetExhausted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			source := retry.WithRetryAfter(func(error) (time.Duration, bool) { calls++; return 0, false })
			err := tc.run(ctx, cancel, source)
			require.Error(t, err)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.wantCalls, calls)
		})
	}
}

// attemptTimeout is short: a stalled attempt waits for it for real.
const attemptTimeout = 2 * time.Millisecond

func never(error) bool { return false }

// stall is an attempt that a stalled server never answers: it returns only
// when ctx ends, with ctx's error, or with the error fail builds from it.
func stall(ctx context.Context, fail func(error) error) error {
	<-ctx.Done()
	if fail != nil {
		return fail(ctx.Err())
	}
	return ctx.Err()
}

// netTimeout is a net.Error whose Timeout() is true, as a transport's
// timeout is.
type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestWithAttemptTimeoutRetriesAnAttemptThatRanOutOfItsTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fail  func(error) error // the stalled attempt's error, from its ctx's
		retry bool
	}{
		{"DeadlineExceeded itself", nil, true},
		{"DeadlineExceeded wrapped, as client-go returns it", func(err error) error {
			return &urlError{err}
		}, true},
		{"a net.Error timeout", func(error) error { return netTimeout{} }, true},
		{"another error after the deadline", func(error) error { return errors.New("boom") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var events []retry.RetryEvent
			var deadlines []time.Time
			calls := 0
			start := time.Now()
			err := retry.OnErrorWithContext(context.Background(), retry.DefaultRetry, never, func(ctx context.Context) error {
				calls++
				d, ok := ctx.Deadline()
				require.True(t, ok, "the attempt has a deadline")
				deadlines = append(deadlines, d)
				if calls == 1 {
					return stall(ctx, tc.fail)
				}
				return nil
			}, retry.WithAttemptTimeout(attemptTimeout), retry.WithSleeper(&fakeSleeper{}),
				retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
			if !tc.retry {
				assert.EqualError(t, err, "boom", "judged by the predicate, which retries nothing")
				assert.Equal(t, 1, calls)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2, calls, "retried although the predicate retries nothing")
			require.Len(t, events, 1)
			assert.Equal(t, 1, events[0].Attempt)
			assert.True(t, errors.Is(events[0].Err, context.DeadlineExceeded) || errors.Is(events[0].Err, netTimeout{}), "OnRetry sees the timeout: %v", events[0].Err)
			assert.False(t, deadlines[0].Before(start.Add(attemptTimeout)), "d after the attempt started")
			assert.True(t, deadlines[1].After(deadlines[0]), "each attempt has a deadline of its own")
		})
	}
}

// urlError wraps err as a *url.Error does: Unwrap, no Timeout of its own.
type urlError struct{ err error }

func (e *urlError) Error() string { return `Put "https://apiserver": ` + e.err.Error() }
func (e *urlError) Unwrap() error { return e.err }

func TestWithAttemptTimeoutJudgedByThePredicateOtherwise(t *testing.T) {
	t.Parallel()
	t.Run("a DeadlineExceeded before the attempt's deadline", func(t *testing.T) {
		t.Parallel()
		// fn's own inner deadline (client-go's rest.Config.Timeout) is not
		// the attempt's: the predicate judges it.
		calls := 0
		err := retry.OnErrorWithContext(context.Background(), retry.DefaultRetry, never, func(context.Context) error {
			calls++
			return context.DeadlineExceeded
		}, retry.WithAttemptTimeout(time.Hour))
		assert.True(t, err == context.DeadlineExceeded, "%v", err)
		assert.Equal(t, 1, calls)
	})
	t.Run("the loop's own deadline first", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		defer cancel()
		calls := 0
		err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, never, func(ctx context.Context) error {
			calls++
			return stall(ctx, nil)
		}, retry.WithAttemptTimeout(time.Hour), retry.WithSleeper(&fakeSleeper{}))
		assert.True(t, err == context.DeadlineExceeded, "returned as it is, as without the option: %v", err)
		assert.Equal(t, 1, calls)
	})
	t.Run("the loop's context cancelled during the attempt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, always, func(actx context.Context) error {
			calls++
			cancel()
			return stall(actx, nil)
		}, retry.WithAttemptTimeout(time.Hour), retry.WithSleeper(&fakeSleeper{}))
		assert.ErrorIs(t, err, context.Canceled, "ctx ends the loop")
		assert.Equal(t, 1, calls)
	})
	t.Run("the loop's context cancelled after the attempt's deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, never, func(actx context.Context) error {
			calls++
			err := stall(actx, nil)
			cancel()
			return err
		}, retry.WithAttemptTimeout(attemptTimeout), retry.WithSleeper(&fakeSleeper{}))
		assert.True(t, err == context.DeadlineExceeded, "the loop's context ended: judged by the predicate, returned as it is: %v", err)
		assert.Equal(t, 1, calls)
	})
	t.Run("no option: the loop's ctx itself", func(t *testing.T) {
		t.Parallel()
		ctx := context.WithValue(context.Background(), ctxKey{}, "v")
		err := retry.OnErrorWithContext(ctx, retry.DefaultRetry, never, func(got context.Context) error {
			assert.Equal(t, ctx, got)
			return nil
		}, retry.WithAttemptTimeout(0))
		assert.NoError(t, err)
	})
}

type ctxKey struct{}

func TestWithAttemptTimeoutExhaustion(t *testing.T) {
	t.Parallel()
	var last error
	var done []retry.DoneEvent
	calls := 0
	err := retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 3}, never, func(ctx context.Context) error {
		calls++
		last = stall(ctx, func(err error) error { return &urlError{err} })
		return last
	}, retry.WithAttemptTimeout(attemptTimeout), retry.WithSleeper(&fakeSleeper{}),
		retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
	assert.True(t, err == last, "the last attempt's error itself: %v", err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 3, calls)
	assert.Equal(t, []retry.DoneEvent{{Attempts: 3, Err: last, Exhausted: true}}, done)
}

func TestWithAttemptTimeoutBudgetCharges(t *testing.T) {
	t.Parallel()
	// Room for one retry: the second timed-out attempt is refused.
	b := &retry.Budget{MinPerSecond: 0.1, Window: 10 * time.Second, Clock: fixedClock{t0}}
	calls := 0
	err := retry.OnErrorWithContext(context.Background(), retry.DefaultRetry, never, func(ctx context.Context) error {
		calls++
		return stall(ctx, nil)
	}, retry.WithAttemptTimeout(attemptTimeout), retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
	assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 2, calls)
}

// fixedClock is a clock.PassiveClock that stands still.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                  { return c.now }
func (c fixedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

func TestWithAttemptTimeoutWriteLoops(t *testing.T) {
	t.Parallel()
	// One read-change-write is one attempt: a stalled read or write is
	// retried with a fresh read, although neither a read's error nor a
	// write's other than a Conflict is retried otherwise.
	for _, tc := range []struct {
		name  string
		stall string // the request that stalls, once
		run   func(ctx context.Context, c *counterClient, opts ...retry.Option) error
		log   []string
	}{
		{"Update, a stalled read", "get", func(ctx context.Context, c *counterClient, opts ...retry.Option) error {
			_, err := retry.Update(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil }, opts...)
			return err
		}, []string{"get", "wait", "get", "update"}},
		{"Update, a stalled write", "update", func(ctx context.Context, c *counterClient, opts ...retry.Option) error {
			_, err := retry.Update(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil }, opts...)
			return err
		}, []string{"get", "update", "wait", "get", "update"}},
		{"UpdateOnConflict without get, a stalled write", "update", func(ctx context.Context, c *counterClient, opts ...retry.Option) error {
			current, err := c.api.Get(ctx, "jobs")
			if err != nil {
				return err
			}
			// No get: the retry works on current again.
			_, err = retry.UpdateOnConflict(ctx, retry.DefaultRetry, current, nil, func(o *Counter) error { o.Owner = "a"; return nil },
				func(ctx context.Context, o *Counter) (*Counter, error) {
					return c.Update(ctx, o, metav1.UpdateOptions{})
				}, opts...)
			return err
		}, []string{"update", "wait", "update"}},
		{"Ensure, a stalled create", "create", func(ctx context.Context, c *counterClient, opts ...retry.Option) error {
			delete(c.api.objs, "jobs")
			_, _, err := retry.Ensure(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil }, opts...)
			return err
		}, []string{"get", "create", "wait", "get", "create"}},
		{"Patch, a stalled patch", "patch", func(ctx context.Context, c *counterClient, opts ...retry.Option) error {
			_, err := retry.Patch(ctx, retry.DefaultRetry, c, desired(), func(o *Counter) error { o.Owner = "a"; return nil }, opts...)
			return err
		}, []string{"get", "patch", "wait", "get", "patch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCounterClient("jobs")
			c.stall = tc.stall
			err := tc.run(context.Background(), c, retry.WithAttemptTimeout(attemptTimeout), retry.WithSleeper(&fakeSleeper{log: &c.log}))
			require.NoError(t, err)
			assert.Equal(t, tc.log, c.log)
			assert.Equal(t, "a", c.api.objs["jobs"].Owner)
		})
	}
}

func TestWithAttemptTimeoutRejectsBadInput(t *testing.T) {
	t.Parallel()
	for name, loop := range everyLoop() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var h hooks
			err := loop(&h, retry.WithAttemptTimeout(-time.Second))
			require.Error(t, err)
			assert.Equal(t, "retry: WithAttemptTimeout(-1s): the timeout must not be negative (0 means none)", err.Error())
			assert.Zero(t, h.calls, "nothing called")
			assert.Empty(t, h.done, "OnDone not called")

			h = hooks{succeedAt: 1}
			err = loop(&h, retry.WithAttemptTimeout(time.Second))
			switch name {
			case "OnError", "RetryOnConflict", "OnRetryAfterError":
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), "retry: WithAttemptTimeout(1s) needs a loop whose fn takes a context"), err.Error())
				assert.Zero(t, h.calls, "nothing called")
				assert.Empty(t, h.done, "OnDone not called")
			default:
				assert.NoError(t, err)
			}
		})
	}
}

func TestWithAttemptTimeoutConflictStillRetried(t *testing.T) {
	t.Parallel()
	// The option changes nothing for an attempt that ends in time.
	var h hooks
	h.succeedAt = 3
	err := everyLoop()["UpdateOnConflict"](&h, retry.WithAttemptTimeout(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 2, h.retries)
	assert.Len(t, h.errs, 2)
	for _, e := range h.errs {
		assert.True(t, apierrors.IsConflict(e))
	}
}
