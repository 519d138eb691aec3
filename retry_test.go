package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// throttled returns a 429 whose server asks for secs seconds.
func throttled(secs int) error {
	return apierrors.NewTooManyRequests("slow down", secs)
}

// serverTimeout returns a 500 ServerTimeout suggesting secs seconds, which
// may be any value a server sends.
func serverTimeout(secs int32) error {
	err := apierrors.NewServerTimeout(schema.GroupResource{Resource: "configmaps"}, "update", 0)
	err.ErrStatus.Details.RetryAfterSeconds = secs
	return err
}

func TestLoopsRejectBadInput(t *testing.T) {
	t.Parallel()
	called := false
	fn := func() error { called = true; return nil }
	ctxFn := func(context.Context) error { called = true; return nil }
	var nilCtx context.Context

	tests := []struct {
		name  string
		run   func(s retry.Sleeper) error
		want  error  // matched with errors.Is; nil means any error
		field string // what the message must name
	}{
		{"OnError zero Backoff", func(s retry.Sleeper) error {
			return retry.OnError(retry.Backoff{}, apierrors.IsConflict, fn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Steps 0"},
		{"RetryOnConflict NaN Factor", func(s retry.Sleeper) error {
			return retry.RetryOnConflict(retry.Backoff{Steps: 3, Factor: math.NaN()}, fn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Factor NaN"},
		{"OnRetryAfterError negative Duration", func(s retry.Sleeper) error {
			return retry.OnRetryAfterError(retry.Backoff{Steps: 3, Duration: -1}, retry.IsRetryAfterError, fn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Duration -1ns"},
		{"OnErrorWithContext negative Cap", func(s retry.Sleeper) error {
			return retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 3, Cap: -1}, apierrors.IsConflict, ctxFn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Cap -1ns"},
		{"RetryOnConflictWithContext infinite Jitter", func(s retry.Sleeper) error {
			return retry.RetryOnConflictWithContext(context.Background(), retry.Backoff{Steps: 3, Jitter: math.Inf(1)}, ctxFn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Jitter +Inf"},
		{"OnRetryAfterErrorWithContext zero Steps", func(s retry.Sleeper) error {
			return retry.OnRetryAfterErrorWithContext(context.Background(), retry.Backoff{Duration: time.Second}, retry.IsRetryAfterError, ctxFn, retry.WithSleeper(s))
		}, retry.ErrInvalidBackoff, "Steps 0"},
		{"OnError nil fn", func(s retry.Sleeper) error {
			return retry.OnError(retry.DefaultRetry, apierrors.IsConflict, nil, retry.WithSleeper(s))
		}, nil, "fn"},
		{"OnError nil retriable", func(s retry.Sleeper) error {
			return retry.OnError(retry.DefaultRetry, nil, fn, retry.WithSleeper(s))
		}, nil, "retriable"},
		{"RetryOnConflict nil fn", func(s retry.Sleeper) error {
			return retry.RetryOnConflict(retry.DefaultRetry, nil, retry.WithSleeper(s))
		}, nil, "fn"},
		{"OnRetryAfterError nil fn", func(s retry.Sleeper) error {
			return retry.OnRetryAfterError(retry.DefaultRetry, retry.IsRetryAfterError, nil, retry.WithSleeper(s))
		}, nil, "fn"},
		{"OnErrorWithContext nil ctx", func(s retry.Sleeper) error {
			return retry.OnErrorWithContext(nilCtx, retry.DefaultRetry, apierrors.IsConflict, ctxFn, retry.WithSleeper(s))
		}, nil, "ctx"},
		{"RetryOnConflictWithContext nil fn", func(s retry.Sleeper) error {
			return retry.RetryOnConflictWithContext(context.Background(), retry.DefaultRetry, nil, retry.WithSleeper(s))
		}, nil, "fn"},
		{"OnRetryAfterErrorWithContext nil retriable", func(s retry.Sleeper) error {
			return retry.OnRetryAfterErrorWithContext(context.Background(), retry.DefaultRetry, nil, ctxFn, retry.WithSleeper(s))
		}, nil, "retriable"},
	}
	for _, tt := range tests {
		var s fakeSleeper
		err := tt.run(&s)
		require.Error(t, err, tt.name)
		assert.True(t, strings.HasPrefix(err.Error(), "retry: "), "%s: %v", tt.name, err)
		assert.Contains(t, err.Error(), tt.field, tt.name)
		if tt.want != nil {
			assert.ErrorIs(t, err, tt.want, tt.name)
		}
		assert.Empty(t, s.waits, tt.name)
	}
	assert.False(t, called, "fn was called for bad input")
}

// TestOnErrorMatchesClientGo runs random backoffs and random fn results
// through OnError and through client-go's loop on wait.ExponentialBackoff:
// same number of calls, same error, and waits equal to wait.Backoff.Step,
// except where this library departs on purpose (a non-retriable context
// error is returned as is).
func TestOnErrorMatchesClientGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	retriableErr := func(i int) error { return conflict(i) }
	otherErr := errors.New("forbidden")

	for i := range 400 {
		b := retry.Backoff{
			// Tiny durations: the oracle sleeps for real.
			Duration: time.Duration(rng.IntN(100)),
			Factor:   []float64{0, 1, 1.5, 2, 3}[rng.IntN(5)],
			Steps:    1 + rng.IntN(8),
		}
		if rng.IntN(2) == 0 {
			b.Cap = time.Duration(rng.IntN(2000))
		}
		results := make([]error, 1+rng.IntN(10))
		for j := range results {
			switch rng.IntN(8) {
			case 0:
				results[j] = nil
			case 1:
				results[j] = otherErr
			case 2:
				// Errors wait.Interrupted matches, which client-go swaps.
				results[j] = []error{context.Canceled, context.DeadlineExceeded, fmt.Errorf("request: %w", context.DeadlineExceeded)}[rng.IntN(3)]
			default:
				results[j] = retriableErr(j)
			}
		}

		want := &script{errs: results}
		wantErr := clientGoOnError(wait.Backoff(b), apierrors.IsConflict, want.fn)

		got := &script{errs: results}
		var rec fakeSleeper
		gotErr := retry.OnError(b, apierrors.IsConflict, got.fn, retry.WithSleeper(&rec))

		name := fmt.Sprintf("case %d: %+v results %v", i, b, results)
		require.Equal(t, want.calls, got.calls, name)
		last := results[min(got.calls, len(results))-1] // what the last call returned
		if wait.Interrupted(last) && wantErr != last {
			// client-go swaps the context error for the previous retriable one
			// (kubernetes/kubernetes#140402); this library returns it as is.
			require.True(t, gotErr == last, "%s: got %v, want %v as is", name, gotErr, last)
		} else {
			require.True(t, wantErr == gotErr, "%s: got %v, want %v", name, gotErr, wantErr)
		}

		// Waits: one between attempts, plus the last one when the Cap ended
		// the loop before Steps attempts were made.
		waits := got.calls - 1
		if apierrors.IsConflict(last) && got.calls < b.Steps {
			waits++
		}
		require.Equal(t, oracleSteps(b, waits), rec.waits, name)
	}
}

func TestOnErrorRules(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("no"))
	tests := []struct {
		name      string
		backoff   retry.Backoff
		opts      []retry.Option
		errs      []error
		wantCalls int
		wantErr   int // index into errs; -1 for nil
		// The waits are the first `waits` steps of wait.Backoff.Step for
		// backoff without jitter, each bounded by maxDelay when positive.
		waits    int
		maxDelay time.Duration
		// continueAtCap passes WithContinueAtCap.
		continueAtCap bool
	}{
		{
			name:      "nil at once",
			backoff:   retry.DefaultRetry,
			errs:      []error{nil},
			wantCalls: 1, wantErr: -1,
		},
		{
			name:      "success after two conflicts",
			backoff:   retry.Backoff{Steps: 5, Duration: time.Second, Factor: 2},
			errs:      []error{conflict(1), conflict(2), nil},
			wantCalls: 3, wantErr: -1,
			waits: 2,
		},
		{
			name:      "non-retriable as is without a wait",
			backoff:   retry.DefaultRetry,
			errs:      []error{conflict(1), forbidden},
			wantCalls: 2, wantErr: 1,
			waits: 1,
			opts:  []retry.Option{retry.WithRand(func() float64 { return 0 })},
		},
		{
			name:      "exhaustion returns the last error after Steps calls",
			backoff:   retry.Backoff{Steps: 3, Duration: time.Second, Factor: 3},
			errs:      []error{conflict(1), conflict(2), conflict(3), conflict(4)},
			wantCalls: 3, wantErr: 2,
			waits: 2,
		},
		{
			name:      "one step, one call, no wait",
			backoff:   retry.Backoff{Steps: 1, Duration: time.Second},
			errs:      []error{conflict(1)},
			wantCalls: 1, wantErr: 0,
		},
		{
			name:      "zero waits are slept too",
			backoff:   retry.Backoff{Steps: 3},
			errs:      []error{conflict(1), conflict(2), conflict(3)},
			wantCalls: 3, wantErr: 2,
			waits: 2,
		},
		{
			// 1s, 2s, then the step to 4s passes the 3s Cap: the loop ends
			// after that wait, as wait.ExponentialBackoff does.
			name:      "Cap ends the loop after its wait",
			backoff:   retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2, Cap: 3 * time.Second},
			errs:      []error{conflict(1), conflict(2), conflict(3)},
			wantCalls: 2, wantErr: 1,
			waits: 2,
		},
		{
			name:          "WithContinueAtCap goes on at the Cap until Steps",
			backoff:       retry.Backoff{Steps: 5, Duration: time.Second, Factor: 2, Cap: 3 * time.Second},
			continueAtCap: true,
			errs:          []error{conflict(1), conflict(2), conflict(3), conflict(4), conflict(5)},
			wantCalls:     5, wantErr: 4,
			waits: 4, // 1s, 2s, then the Cap: 3s, 3s
		},
		{
			name:      "WithMaxDelay bounds each wait",
			backoff:   retry.Backoff{Steps: 4, Duration: time.Second, Factor: 10},
			opts:      []retry.Option{retry.WithMaxDelay(5 * time.Second)},
			errs:      []error{conflict(1), conflict(2), conflict(3), conflict(4)},
			wantCalls: 4, wantErr: 3,
			waits: 3, maxDelay: 5 * time.Second,
		},
		{
			name:      "WithMaxDelay of 0 is no bound",
			backoff:   retry.Backoff{Steps: 2, Duration: time.Hour},
			opts:      []retry.Option{retry.WithMaxDelay(0)},
			errs:      []error{conflict(1), conflict(2)},
			wantCalls: 2, wantErr: 1,
			waits: 1,
		},
		{
			name:      "negative WithMaxDelay is no bound",
			backoff:   retry.Backoff{Steps: 2, Duration: time.Hour},
			opts:      []retry.Option{retry.WithMaxDelay(-time.Second)},
			errs:      []error{conflict(1), conflict(2)},
			wantCalls: 2, wantErr: 1,
			waits: 1,
		},
		{
			name:      "later option wins",
			backoff:   retry.Backoff{Steps: 2, Duration: time.Hour},
			opts:      []retry.Option{retry.WithMaxDelay(time.Second), retry.WithMaxDelay(time.Minute), {}},
			errs:      []error{conflict(1), conflict(2)},
			wantCalls: 2, wantErr: 1,
			waits: 1, maxDelay: time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &script{errs: tt.errs}
			var rec fakeSleeper
			var events []retry.RetryEvent
			onRetry := retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) })
			opts := append(slices.Clone(tt.opts), retry.WithSleeper(&rec), onRetry)
			if tt.continueAtCap {
				opts = append(opts, retry.WithContinueAtCap())
			}
			err := retry.RetryOnConflict(tt.backoff, s.fn, opts...)
			assert.Equal(t, tt.wantCalls, s.calls, "calls")
			if tt.wantErr < 0 {
				assert.NoError(t, err)
			} else {
				assert.Same(t, tt.errs[tt.wantErr], err, "the error itself, not a wrapper")
			}

			noJitter := tt.backoff
			noJitter.Jitter = 0
			var want []time.Duration
			var final []bool // the wait follows the step that reached the Cap
			oracle := wait.Backoff(noJitter)
			for range tt.waits {
				d := oracle.Step()
				if tt.maxDelay > 0 {
					d = min(d, tt.maxDelay)
				}
				want = append(want, d)
				final = append(final, oracle.Steps == 0 && !tt.continueAtCap)
			}
			assert.Equal(t, want, rec.waits)
			// Every wait slept is reported first, the one at the Cap too.
			require.Len(t, events, len(rec.waits))
			for i, e := range events {
				assert.Equal(t, retry.RetryEvent{Attempt: i + 1, Err: tt.errs[i], Delay: rec.waits[i], Final: final[i]}, e)
			}
		})
	}
}

func TestDefaultsMatchClientGo(t *testing.T) {
	t.Parallel()
	// Mirrors of client-go's retry.DefaultRetry and retry.DefaultBackoff; with
	// jitter fixed, their waits are wait.Backoff.Step's.
	for name, b := range map[string]retry.Backoff{"DefaultRetry": retry.DefaultRetry, "DefaultBackoff": retry.DefaultBackoff} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var rec fakeSleeper
			s := conflicts(b.Steps + 1)
			err := retry.RetryOnConflict(b, s.fn, retry.WithSleeper(&rec), retry.WithRand(func() float64 { return 0 }))
			assert.Same(t, s.errs[b.Steps-1], err)
			assert.Equal(t, b.Steps, s.calls)
			noJitter := b
			noJitter.Jitter = 0
			assert.Equal(t, oracleSteps(noJitter, b.Steps-1), rec.waits)
		})
	}
}

func TestOnRetryAfterError(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 6, Duration: 500 * time.Millisecond, Factor: 2}
	tests := []struct {
		name string
		errs []error
		opts []retry.Option
		// want gives each wait from the backoff's own step and the error's
		// Retry-After: max of the two, the step always taken.
		want func(step []time.Duration) []time.Duration
	}{
		{
			name: "server delay wins until the backoff outgrows it",
			errs: []error{throttled(3), throttled(3), throttled(3), throttled(3), throttled(3), throttled(3)},
			want: func(s []time.Duration) []time.Duration {
				return []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second, s[3], s[4]}
			},
		},
		{
			name: "no delay suggested uses the step",
			errs: []error{apierrors.NewInternalError(errors.New("boom")), nil},
			want: func(s []time.Duration) []time.Duration { return []time.Duration{s[0]} },
		},
		{
			name: "WithMaxDelay bounds the server's delay",
			errs: []error{throttled(3600), nil},
			opts: []retry.Option{retry.WithMaxDelay(2 * time.Second)},
			want: func([]time.Duration) []time.Duration { return []time.Duration{2 * time.Second} },
		},
		{
			name: "negative suggestion counts as 0",
			errs: []error{serverTimeout(-5), nil},
			want: func(s []time.Duration) []time.Duration { return []time.Duration{s[0]} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec fakeSleeper
			var events []retry.RetryEvent
			s := &script{errs: tt.errs}
			_ = retry.OnRetryAfterError(b, func(error) bool { return true }, s.fn, append(tt.opts, retry.WithSleeper(&rec),
				retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))...)
			assert.Equal(t, tt.want(oracleSteps(b, b.Steps)), rec.waits)
			require.Len(t, events, len(rec.waits))
			for i, e := range events {
				want, _ := retry.RetryAfter(tt.errs[i])
				assert.Equal(t, want, e.RetryAfter, "RetryAfter of event %d", i+1)
				assert.GreaterOrEqual(t, e.RetryAfter, time.Duration(0))
			}
		})
	}
}

func TestOnRetryAfterErrorContext(t *testing.T) {
	t.Parallel()
	s := &script{errs: []error{throttled(2), throttled(2), nil}}
	clk := testingclock.NewFakeClock(time.Time{})
	err := retry.OnRetryAfterErrorWithContext(context.Background(), retry.DefaultRetryAfterBackoff, retry.IsRetryAfterError, s.ctxFn, retry.WithSleeper(clk))
	require.NoError(t, err)
	assert.Equal(t, 3, s.calls)
	assert.Equal(t, 4*time.Second, clk.Since(time.Time{}))
}

func BenchmarkOnErrorSuccess(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return nil }
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn)
	}
}

func BenchmarkRetryOnConflictSuccess(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return nil }
	b.ResetTimer()
	for range b.N {
		sink = retry.RetryOnConflict(retry.DefaultRetry, fn)
	}
}

var valueSink string

func BenchmarkOnErrorValueSuccess(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	fn := func(context.Context) (string, error) { return "done", nil }
	b.ResetTimer()
	for range b.N {
		valueSink, sink = retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, fn)
	}
}

// errBench is the pre-built retriable error of the zero-wait loops, so that
// building an error is not part of what is measured.
var errBench = errors.New("retriable")

// zeroWait allows 1 attempt and 4 retries, every wait 0.
var zeroWait = retry.Backoff{Steps: 5}

// BenchmarkOnErrorZeroWait is a loop that fails 5 times (1 attempt and 4
// retries, waits of 0) with a trivial predicate: the loop's own cost.
func BenchmarkOnErrorZeroWait(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return errBench }
	always := func(error) bool { return true }
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(zeroWait, always, fn)
	}
	if sink != errBench {
		b.Fatalf("got %v, want the last retriable error", sink)
	}
}

// BenchmarkRetryOnConflictZeroWait is the same loop on a Conflict, with
// apierrors.IsConflict as the predicate, so it includes the cost of matching
// the API error on every attempt.
func BenchmarkRetryOnConflictZeroWait(b *testing.B) {
	b.ReportAllocs()
	err := conflict(1)
	fn := func() error { return err }
	b.ResetTimer()
	for range b.N {
		sink = retry.RetryOnConflict(zeroWait, fn)
	}
	if sink != err {
		b.Fatalf("got %v, want the Conflict", sink)
	}
}

// BenchmarkOnErrorSuccessWithOptions is the success path with five options
// built inside the loop, at the call, as a caller writes them.
func BenchmarkOnErrorSuccessWithOptions(b *testing.B) {
	b.ReportAllocs()
	clk := testingclock.NewFakeClock(time.Time{})
	fn := func() error { return nil }
	retries := 0
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn,
			retry.WithSleeper(clk),
			retry.WithMaxDelay(time.Second),
			retry.WithRand(rand.Float64),
			retry.WithContinueAtCap(),
			retry.WithOnRetry(func(retry.RetryEvent) { retries++ }))
	}
	if sink != nil || retries != 0 {
		b.Fatalf("got %v after %d retries, want nil after none", sink, retries)
	}
}

// BenchmarkOnErrorZeroWaitWithOptions is BenchmarkOnErrorZeroWait with the
// same five options, so the waits go to the fake clock and the hook runs 4
// times per call. Its allocations minus BenchmarkOnErrorZeroWait's are what
// the options cost.
func BenchmarkOnErrorZeroWaitWithOptions(b *testing.B) {
	b.ReportAllocs()
	clk := testingclock.NewFakeClock(time.Time{})
	fn := func() error { return errBench }
	always := func(error) bool { return true }
	retries := 0
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(zeroWait, always, fn,
			retry.WithSleeper(clk),
			retry.WithMaxDelay(time.Second),
			retry.WithRand(rand.Float64),
			retry.WithContinueAtCap(),
			retry.WithOnRetry(func(retry.RetryEvent) { retries++ }))
	}
	if sink != errBench || retries%4 != 0 {
		b.Fatalf("got %v after %d retries, want the last error after 4 per call", sink, retries)
	}
}

func TestOnErrorValueMatchesOnErrorWithContext(t *testing.T) {
	t.Parallel()
	// OnErrorValue runs on the same loop as OnErrorWithContext: for random
	// backoffs and scripts both make the same calls and waits and return the
	// same error; on success OnErrorValue returns that attempt's value, on
	// any error the zero value.
	r := rand.New(rand.NewPCG(9, 10))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("no"))
	for i := range 300 {
		b := retry.Backoff{
			Steps:    1 + r.IntN(6),
			Duration: time.Duration(r.IntN(5)) * time.Second,
			Factor:   float64(r.IntN(4)),
			Jitter:   float64(r.IntN(2)) / 2,
			Cap:      time.Duration(r.IntN(3)) * 4 * time.Second,
		}
		var errs []error
		for j := range 1 + r.IntN(7) {
			switch r.IntN(5) {
			case 0:
				errs = append(errs, nil)
			case 1:
				errs = append(errs, forbidden)
			default:
				errs = append(errs, conflict(j+1))
			}
		}
		jitter := func() float64 { return 0.25 }
		var recA, recB fakeSleeper
		a := &script{errs: errs}
		errA := retry.OnErrorWithContext(context.Background(), b, apierrors.IsConflict, a.ctxFn, retry.WithSleeper(&recA), retry.WithRand(jitter))
		v := &script{errs: errs}
		got, errB := retry.OnErrorValue(context.Background(), b, apierrors.IsConflict, v.valueFn, retry.WithSleeper(&recB), retry.WithRand(jitter))
		require.Equal(t, a.calls, v.calls, "case %d: calls", i)
		require.Equal(t, recA.waits, recB.waits, "case %d: waits", i)
		if errA == nil {
			require.NoError(t, errB, "case %d", i)
		} else {
			require.Same(t, errA, errB, "case %d: error", i)
		}
		if errB == nil {
			require.Equal(t, v.calls, got, "case %d: the value of the attempt that succeeded", i)
		} else {
			require.Zero(t, got, "case %d: the zero value with an error", i)
		}
	}
}

func TestOnErrorValueRejectsBadInput(t *testing.T) {
	t.Parallel()
	called := false
	fn := func(context.Context) (int, error) { called = true; return 1, nil }
	var nilCtx context.Context
	tests := []struct {
		name string
		run  func() (int, error)
		want string
	}{
		{"nil fn", func() (int, error) {
			return retry.OnErrorValue[int](context.Background(), retry.DefaultRetry, apierrors.IsConflict, nil)
		}, "retry: fn is nil"},
		{"nil retriable", func() (int, error) {
			return retry.OnErrorValue(context.Background(), retry.DefaultRetry, nil, fn)
		}, "retry: retriable predicate is nil"},
		{"nil ctx", func() (int, error) {
			return retry.OnErrorValue(nilCtx, retry.DefaultRetry, apierrors.IsConflict, fn)
		}, "retry: ctx is nil"},
		{"zero Backoff", func() (int, error) {
			return retry.OnErrorValue(context.Background(), retry.Backoff{}, apierrors.IsConflict, fn)
		}, "Steps 0 is below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int
			var err error
			require.NotPanics(t, func() { got, err = tt.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Zero(t, got)
		})
	}
	assert.False(t, called)
}

func TestOnErrorValueContextEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(5)
	rec := fakeSleeper{hook: func(time.Duration) { cancel() }}
	got, err := retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, s.valueFn, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Zero(t, got)
	assert.Equal(t, 1, s.calls)
}

func TestDefaultRetryAfterBackoffNeverSpins(t *testing.T) {
	t.Parallel()
	// A 500 ServerTimeout suggesting 0s passes IsRetryAfterError; every wait
	// is still at least 1s, 10 of them for 11 attempts.
	require.True(t, retry.IsRetryAfterError(serverTimeout(0)))
	clk := testingclock.NewFakeClock(time.Time{})
	var rec fakeSleeper
	s := &script{errs: []error{serverTimeout(0)}}
	err := retry.OnRetryAfterError(retry.DefaultRetryAfterBackoff, retry.IsRetryAfterError, s.fn,
		retry.WithSleeper(&rec), retry.WithOnRetry(func(e retry.RetryEvent) { clk.Step(e.Delay) }))
	assert.Same(t, s.errs[0], err)
	assert.Equal(t, 11, s.calls)
	require.Len(t, rec.waits, 10)
	for _, d := range rec.waits {
		assert.GreaterOrEqual(t, d, time.Second)
	}
	assert.Equal(t, 10*time.Second, clk.Since(time.Time{}))
}
