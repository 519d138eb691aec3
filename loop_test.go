package retry_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

func TestContextDoneBeforeFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	var rec fakeSleeper
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error { called = true; return nil }, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	assert.Empty(t, rec.waits)
	assert.Equal(t, "retry: context canceled before the first attempt", err.Error())
}

func TestContextCancelledWhileAtCap(t *testing.T) {
	t.Parallel()
	// The step reaches the Cap, so the loop would return the conflict after
	// the wait; ctx ended during it, so ctx's error comes back, wrapping it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(3)
	rec := fakeSleeper{hook: func(time.Duration) { cancel() }}
	b := retry.Backoff{Steps: 3, Duration: time.Second, Factor: 10, Cap: 2 * time.Second}
	err := retry.RetryOnConflictWithContext(ctx, b, s.ctxFn, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Equal(t, 1, s.calls)
}

func TestContextErrorFromFnReturnedAsIs(t *testing.T) {
	t.Parallel()
	// client-go swaps this context.Canceled for the earlier conflict
	// (kubernetes/kubernetes#140402); it is returned as it is here.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	fn := func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return conflict(1)
		}
		cancel()
		return ctx.Err()
	}
	var rec fakeSleeper
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, fn, retry.WithSleeper(&rec))
	assert.Same(t, context.Canceled, err)
	assert.Equal(t, 2, calls)

	// The same through the plain loop, against client-go's.
	calls = 0
	plain := func() error { return fn(ctx) }
	assert.Same(t, context.Canceled, retry.RetryOnConflict(retry.DefaultRetry, plain, retry.WithSleeper(&rec)))
	calls = 0
	assert.True(t, apierrors.IsConflict(clientGoOnError(wait.Backoff{Steps: 5}, apierrors.IsConflict, plain)), "client-go returns the older conflict")
}

func TestContextDoneAfterRetriableError(t *testing.T) {
	t.Parallel()
	// fn's conflict is retriable but ctx is done: no wait is started and the
	// error names both.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec fakeSleeper
	events := 0
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error {
		cancel()
		return conflict(1)
	}, retry.WithSleeper(&rec), retry.WithOnRetry(func(retry.RetryEvent) { events++ }))
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, apierrors.IsConflict(err))
	assert.Empty(t, rec.waits)
	assert.Zero(t, events)
}

// passedDeadline is a context whose deadline has passed but which does not
// know it yet, as a context is between its deadline and its timer firing.
type passedDeadline struct{ context.Context }

func (passedDeadline) Deadline() (time.Time, bool) { return time.Unix(0, 0), true }

func TestDeadlinePassedButNotYetDone(t *testing.T) {
	t.Parallel()
	// Even a zero wait outlasts a deadline that has passed: the loop returns
	// an error matching DeadlineExceeded, without a wait or an attempt more.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(3)
	err := retry.RetryOnConflictWithContext(passedDeadline{ctx}, retry.Backoff{Steps: 3}, s.ctxFn)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Equal(t, 1, s.calls)
	assert.Equal(t, "retry: context deadline exceeded after 1 attempt, last error: "+s.errs[0].Error(), err.Error())

	// A real deadline a moment away, with zero waits: whichever way the race
	// with its timer goes, the error is a deadline's.
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Microsecond)
		err := retry.OnErrorWithContext(ctx, retry.Backoff{Steps: math.MaxInt}, func(error) bool { return true },
			func(context.Context) error { return errBench })
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var msg string
		require.NotPanics(t, func() { msg = err.Error() })
		if !strings.HasSuffix(msg, "before the first attempt") { // the deadline may pass before it
			require.ErrorIs(t, err, errBench)
		}
	}
}

func TestPanicsPropagate(t *testing.T) {
	t.Parallel()
	type boom struct{}
	tests := map[string]func() error{
		"fn": func() error {
			return retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error { panic(boom{}) })
		},
		"retriable": func() error {
			return retry.OnError(retry.DefaultRetry, func(error) bool { panic(boom{}) }, func() error { return conflict(1) })
		},
		"fn with context": func() error {
			return retry.RetryOnConflictWithContext(context.Background(), retry.DefaultRetry, func(context.Context) error { panic(boom{}) })
		},
	}
	for name, run := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.PanicsWithValue(t, boom{}, func() { _ = run() })
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for i := range 16 {
		wgGo(&wg, func() {
			s := conflicts(3)
			s.errs = append(s.errs, nil)
			clk := testingclock.NewFakeClock(time.Time{})
			var err error
			if i%2 == 0 {
				err = retry.RetryOnConflict(retry.DefaultRetry, s.fn, retry.WithSleeper(clk))
			} else {
				err = retry.RetryOnConflictWithContext(context.Background(), retry.DefaultRetry, s.ctxFn, retry.WithSleeper(clk))
			}
			assert.NoError(t, err)
			assert.Equal(t, 4, s.calls)
		})
	}
	wg.Wait()
}

func TestSuccessPathAllocations(t *testing.T) {
	ok := func() error { return nil }
	okCtx := func(context.Context) error { return nil }
	ctx := context.Background()
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, ok)
		_ = retry.RetryOnConflict(retry.DefaultBackoff, ok)
		_ = retry.RetryOnConflictWithContext(ctx, retry.DefaultBackoff, okCtx)
	}))
	clk := testingclock.NewFakeClock(time.Time{})
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.RetryOnConflict(retry.DefaultBackoff, ok, retry.WithSleeper(clk), retry.WithMaxDelay(time.Second), retry.WithContinueAtCap(), retry.WithRetryAfter(retry.RetryAfter))
	}), "options are values")
	okValue := func(context.Context) (string, error) { return "done", nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_, _ = retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, okValue)
	}), "OnErrorValue")
}

func BenchmarkOnErrorSuccessParallel(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn); err != nil {
				b.Error(err)
			}
		}
	})
}
