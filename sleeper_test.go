package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

func TestSleeperFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	b := retry.Backoff{Steps: 4, Duration: 100 * time.Millisecond, Factor: 2}
	err := retry.RetryOnConflict(b, conflicts(4).fn, retry.WithSleeper(clk))
	require.True(t, apierrors.IsConflict(err))
	// 100ms + 200ms + 400ms, slept on the fake clock only.
	var want time.Duration
	for _, d := range oracleSteps(b, 3) {
		want += d
	}
	assert.Equal(t, want, clk.Since(start))
}

func TestContextCancelledDuringCustomSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(10)
	rec := fakeSleeper{hook: func(time.Duration) { cancel() }}
	var events int
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, s.ctxFn, retry.WithSleeper(&rec), retry.WithOnRetry(func(retry.RetryEvent) { events++ }))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, s.errs[0], "wraps the last attempt's error")
	assert.True(t, apierrors.IsConflict(err), "IsConflict still holds")
	assert.Equal(t, 1, s.calls)
	assert.Len(t, rec.waits, 1, "the custom sleeper is called as is")
	assert.Equal(t, 1, events)
	assert.Equal(t, "retry: context canceled after 1 attempt, last error: "+s.errs[0].Error(), err.Error())
}

func TestDefaultSleeperNotStartedPastDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s := conflicts(3)
	events := 0
	start := time.Now()
	err := retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 3, Duration: 2 * time.Hour}, s.ctxFn,
		retry.WithOnRetry(func(retry.RetryEvent) { events++ }))
	assert.Less(t, time.Since(start), time.Minute, "returned at once")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Equal(t, 1, s.calls)
	assert.Zero(t, events, "a wait not started is not reported")
	assert.Equal(t, "retry: waiting 2h0m0s would exceed the context deadline after 1 attempt, last error: "+s.errs[0].Error(), err.Error())
}

func TestDefaultSleeperStartsWaitBeforeDeadline(t *testing.T) {
	t.Parallel()
	// A 1ms wait under a deadline an hour away is slept, and the loop goes on.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s := &script{errs: []error{conflict(1), nil}}
	events := 0
	err := retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 3, Duration: time.Millisecond}, s.ctxFn,
		retry.WithOnRetry(func(retry.RetryEvent) { events++ }))
	assert.NoError(t, err)
	assert.Equal(t, 2, s.calls)
	assert.Equal(t, 1, events)
}

func TestCustomSleeperIgnoresDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s := conflicts(3)
	var rec fakeSleeper
	err := retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 3, Duration: 2 * time.Hour}, s.ctxFn, retry.WithSleeper(&rec))
	assert.Same(t, s.errs[2], err)
	assert.Equal(t, []time.Duration{2 * time.Hour, 2 * time.Hour}, rec.waits)
}

func TestDefaultSleeperCutShortByCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(3)
	start := time.Now()
	// A 30s wait, so a wait that is not cut short fails the test instead of
	// hanging it.
	err := retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 3, Duration: 30 * time.Second}, s.ctxFn,
		retry.WithOnRetry(func(retry.RetryEvent) {
			// Cancel once the wait has begun.
			go func() { time.Sleep(time.Millisecond); cancel() }()
		}))
	assert.Less(t, time.Since(start), 10*time.Second, "the wait was cut short")
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Equal(t, 1, s.calls)
}

func TestDefaultSleeperRealWait(t *testing.T) {
	t.Parallel()
	// A few milliseconds of real time: the default sleeper does wait.
	b := retry.Backoff{Steps: 2, Duration: 2 * time.Millisecond}
	for name, run := range map[string]func(*script) error{
		"plain":   func(s *script) error { return retry.RetryOnConflict(b, s.fn) },
		"context": func(s *script) error { return retry.RetryOnConflictWithContext(context.Background(), b, s.ctxFn) },
	} {
		s := conflicts(2)
		start := time.Now()
		err := run(s)
		assert.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond, name)
		assert.Same(t, s.errs[1], err, name)
	}
}

// BenchmarkWaitAccuracy measures how much longer than asked the default
// sleeper waits, through the public API: the time from the end of the first
// call of fn to the start of the second, minus the wait the backoff asks
// for. mode=plain is OnError (time.Sleep); mode=context is
// OnErrorWithContext under a cancelable context (a timer and a select). It
// reports the median and the 99th percentile of the overshoot.
func BenchmarkWaitAccuracy(b *testing.B) {
	for _, wait := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		for _, mode := range []string{"plain", "context"} {
			b.Run(fmt.Sprintf("wait=%v/mode=%s", wait, mode), func(b *testing.B) {
				b.ReportAllocs()
				bo := retry.Backoff{Steps: 2, Duration: wait} // one wait of exactly `wait`
				always := func(error) bool { return true }
				var (
					firstEnd  time.Time
					calls     int
					overshoot []time.Duration
				)
				fn := func() error {
					start := time.Now()
					calls++
					if calls%2 == 1 {
						firstEnd = time.Now()
						return errBench
					}
					overshoot = append(overshoot, start.Sub(firstEnd)-wait)
					return nil
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ctxFn := func(context.Context) error { return fn() }
				b.ResetTimer()
				for range b.N {
					var err error
					if mode == "plain" {
						err = retry.OnError(bo, always, fn)
					} else {
						err = retry.OnErrorWithContext(ctx, bo, always, ctxFn)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				reportPercentiles(b, overshoot, "overshoot")
			})
		}
	}
}

// BenchmarkCancelLatency measures how long after cancel() a loop waiting an
// hour under the default sleeper returns. The wait is given time to begin
// before the cancel.
func BenchmarkCancelLatency(b *testing.B) {
	b.Run("wait=1h", func(b *testing.B) {
		b.ReportAllocs()
		bo := retry.Backoff{Steps: 2, Duration: time.Hour}
		always := func(error) bool { return true }
		fn := func(context.Context) error { return errBench }
		var latency []time.Duration
		b.ResetTimer()
		for range b.N {
			ctx, cancel := context.WithCancel(context.Background())
			var (
				wg        sync.WaitGroup
				cancelled time.Time
			)
			waitBegins := retry.WithOnRetry(func(retry.RetryEvent) {
				wgGo(&wg, func() {
					time.Sleep(200 * time.Microsecond) // let the loop enter its wait
					cancelled = time.Now()
					cancel()
				})
			})
			err := retry.OnErrorWithContext(ctx, bo, always, fn, waitBegins)
			returned := time.Now()
			wg.Wait()
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errBench) {
				b.Fatalf("got %v, want context.Canceled wrapping the last error", err)
			}
			latency = append(latency, returned.Sub(cancelled))
		}
		reportPercentiles(b, latency, "latency")
	})
}

// reportPercentiles reports the median and the 99th percentile (nearest
// rank) of ds, in microseconds.
func reportPercentiles(b *testing.B, ds []time.Duration, what string) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := max(int(math.Ceil(p*float64(len(ds))))-1, 0)
		return float64(ds[i]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), "p50-"+what+"-µs")
	b.ReportMetric(at(0.99), "p99-"+what+"-µs")
}

func TestRealClockSleeperIsTheDefault(t *testing.T) {
	t.Parallel()
	// clock.RealClock cannot be cut short, so WithSleeper treats it as the
	// default sleeper: a wait that would outlast the deadline is not
	// started, and a cancel cuts a wait short.
	for name, s := range map[string]retry.Sleeper{"value": clock.RealClock{}, "pointer": &clock.RealClock{}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			c := conflicts(3)
			done := make(chan error, 1)
			go func() {
				done <- retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 3, Duration: 2 * time.Hour}, c.ctxFn, retry.WithSleeper(s))
			}()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), "waiting 2h0m0s would exceed the context deadline")
			case <-time.After(30 * time.Second):
				cancel()
				t.Fatal("the loop slept through RealClock instead of returning at once")
			}

			ctx2, cancel2 := context.WithCancel(context.Background())
			time.AfterFunc(time.Millisecond, cancel2)
			go func() {
				done <- retry.RetryOnConflictWithContext(ctx2, retry.Backoff{Steps: 3, Duration: time.Hour}, conflicts(3).ctxFn, retry.WithSleeper(s))
			}()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, context.Canceled)
			case <-time.After(30 * time.Second):
				t.Fatal("the cancel did not cut the hour's wait short")
			}
		})
	}
}
