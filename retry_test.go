package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var _ retry.Sleeper = (*testingclock.FakeClock)(nil)

// recorder is a Sleeper that records every wait and then runs hook, if set.
type recorder struct {
	waits []time.Duration
	hook  func()
}

func (r *recorder) Sleep(d time.Duration) {
	r.waits = append(r.waits, d)
	if r.hook != nil {
		r.hook()
	}
}

// conflict returns a distinct 409 Conflict, so tests can tell which attempt's
// error came back.
func conflict(n int) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, fmt.Sprintf("cm-%d", n), errors.New("the object has been modified"))
}

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

// script is a fn that returns its errors in order and then repeats the last.
type script struct {
	errs  []error
	calls int
}

func (s *script) fn() error {
	err := s.errs[min(s.calls, len(s.errs)-1)]
	s.calls++
	return err
}

func (s *script) ctxFn(context.Context) error { return s.fn() }

func conflicts(n int) *script {
	s := &script{}
	for i := range n {
		s.errs = append(s.errs, conflict(i+1))
	}
	return s
}

// oracleSteps returns the first n waits of wait.Backoff.Step for b.
func oracleSteps(b retry.Backoff, n int) []time.Duration {
	w := wait.Backoff(b)
	var out []time.Duration
	for range n {
		out = append(out, w.Step())
	}
	return out
}

// clientGoOnError is client-go's retry.OnError: the same loop over
// wait.ExponentialBackoff, kept here as the oracle because the root module
// does not depend on client-go.
func clientGoOnError(b wait.Backoff, retriable func(error) bool, fn func() error) error {
	var last error
	err := wait.ExponentialBackoff(b, func() (bool, error) {
		switch err := fn(); {
		case err == nil:
			return true, nil
		case retriable(err):
			last = err
			return false, nil
		default:
			return false, err
		}
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
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
		var s recorder
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

func TestInvalidBackoffErrorIsValidates(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 0, Factor: -2}
	err := retry.OnError(b, apierrors.IsConflict, func() error { return nil })
	require.Error(t, err)
	assert.Equal(t, b.Validate().Error(), err.Error())
	assert.Contains(t, err.Error(), "Steps 0")
	assert.Contains(t, err.Error(), "Factor -2")
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
		var rec recorder
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
			var rec recorder
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
			var rec recorder
			b := retry.Backoff{Steps: 3, Duration: time.Second, Factor: 1, Jitter: 0.5}
			err := retry.RetryOnConflict(b, conflicts(3).fn, retry.WithSleeper(&rec), retry.WithRand(func() float64 { return tt.r }))
			require.True(t, apierrors.IsConflict(err))
			assert.Equal(t, []time.Duration{tt.want, tt.want}, rec.waits)
			assert.Less(t, rec.waits[0], 1500*time.Millisecond, "jitter stays below Jitter*Duration")
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
			var rec recorder
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

func TestWithOnRetry(t *testing.T) {
	t.Parallel()
	s := &script{errs: []error{conflict(1), throttled(7), conflict(3), nil}}
	var events []retry.RetryEvent
	var rec recorder
	b := retry.Backoff{Steps: 5, Duration: time.Second, Factor: 2}
	err := retry.OnRetryAfterError(b, func(error) bool { return true }, s.fn,
		retry.WithSleeper(&rec),
		retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
	require.NoError(t, err)
	want := []retry.RetryEvent{
		{Attempt: 1, Err: s.errs[0], Delay: time.Second},
		{Attempt: 2, Err: s.errs[1], Delay: 7 * time.Second, RetryAfter: 7 * time.Second},
		{Attempt: 3, Err: s.errs[2], Delay: 4 * time.Second},
	}
	assert.Equal(t, want, events)
	assert.Equal(t, []time.Duration{time.Second, 7 * time.Second, 4 * time.Second}, rec.waits, "each event's Delay is the wait slept")
}

func TestWithOnRetryNotCalledWithoutAWait(t *testing.T) {
	t.Parallel()
	forbidden := errors.New("forbidden")
	for name, errs := range map[string][]error{
		"success":       {nil},
		"non-retriable": {forbidden},
		"last attempt":  {conflict(1)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			called := 0
			var rec recorder
			_ = retry.RetryOnConflict(retry.Backoff{Steps: 1}, (&script{errs: errs}).fn,
				retry.WithSleeper(&rec), retry.WithOnRetry(func(retry.RetryEvent) { called++ }))
			assert.Zero(t, called)
			assert.Empty(t, rec.waits)
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
			var rec recorder
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

func TestContextDoneBeforeFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	var rec recorder
	err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error { called = true; return nil }, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	assert.Empty(t, rec.waits)
	assert.Equal(t, "retry: context canceled before the first attempt", err.Error())
}

func TestContextCancelledDuringCustomSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(10)
	rec := recorder{hook: cancel}
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

func TestContextCancelledWhileAtCap(t *testing.T) {
	t.Parallel()
	// The step reaches the Cap, so the loop would return the conflict after
	// the wait; ctx ended during it, so ctx's error comes back, wrapping it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := conflicts(3)
	rec := recorder{hook: cancel}
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
	var rec recorder
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
	var rec recorder
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
	var rec recorder
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
		wg.Go(func() {
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

var sink error

func BenchmarkOnErrorSuccess(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return nil }
	for b.Loop() {
		sink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn)
	}
}

func BenchmarkRetryOnConflictSuccess(b *testing.B) {
	b.ReportAllocs()
	fn := func() error { return nil }
	for b.Loop() {
		sink = retry.RetryOnConflict(retry.DefaultRetry, fn)
	}
}

var valueSink string

func BenchmarkOnErrorValueSuccess(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	fn := func(context.Context) (string, error) { return "done", nil }
	for b.Loop() {
		valueSink, sink = retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, fn)
	}
}

// Benchmarks of the loops' own cost. Every wait here is 0 or goes to a fake
// clock, so they measure the loop, not the time it sleeps. The side-by-side
// comparison with client-go is in integration/bench; the real waits of the
// default sleeper are measured by BenchmarkWaitAccuracy below.

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
	for b.Loop() {
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
	for b.Loop() {
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
	for b.Loop() {
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
	for b.Loop() {
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

// The benchmarks in this file wait in real time: they measure the default
// sleeper, not the loop's cost. `make bench` skips them; `make bench-wait`
// runs them with a fixed number of waits:
//
//	go test -run='^$' -bench='^Benchmark(WaitAccuracy|CancelLatency)$' -benchtime=200x .

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
				for b.Loop() {
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
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			var (
				wg        sync.WaitGroup
				cancelled time.Time
			)
			waitBegins := retry.WithOnRetry(func(retry.RetryEvent) {
				wg.Go(func() {
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

// valueScript is a value-returning fn: attempt i returns (i, errs[i-1]),
// repeating the last error.
func (s *script) valueFn(context.Context) (int, error) {
	err := s.fn()
	return s.calls, err
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
		var recA, recB recorder
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
	rec := recorder{hook: cancel}
	got, err := retry.OnErrorValue(ctx, retry.DefaultRetry, apierrors.IsConflict, s.valueFn, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, s.errs[0])
	assert.Zero(t, got)
	assert.Equal(t, 1, s.calls)
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
	var rec recorder
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
	var rec recorder
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec)))
	want := rec.waits
	assert.Equal(t, []time.Duration{3 * time.Second, 2 * time.Second, 2 * time.Second}, want, "max(Step, the server's delay)")

	rec = recorder{}
	require.NoError(t, onError(retry.WithSleeper(&rec), retry.WithRetryAfter(retry.RetryAfter)))
	assert.Equal(t, want, rec.waits, "OnError with WithRetryAfter(RetryAfter) is OnRetryAfterError")

	rec = recorder{}
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec), retry.WithRetryAfter(func(error) (time.Duration, bool) { return 7 * time.Second, true })))
	assert.Equal(t, []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, rec.waits, "a later WithRetryAfter replaces the preset")

	rec = recorder{}
	require.NoError(t, onRetryAfter(retry.WithSleeper(&rec), retry.WithRetryAfter(func(error) (time.Duration, bool) { return 7 * time.Second, true }), retry.WithRetryAfter(nil)))
	assert.Equal(t, want, rec.waits, "WithRetryAfter(nil) restores OnRetryAfterError's RetryAfter")

	rec = recorder{}
	require.NoError(t, onError(retry.WithSleeper(&rec), retry.WithRetryAfter(nil)))
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, rec.waits, "WithRetryAfter(nil) on OnError: no server delay")
}

func TestDefaultRetryAfterBackoffNeverSpins(t *testing.T) {
	t.Parallel()
	// A 500 ServerTimeout suggesting 0s passes IsRetryAfterError; every wait
	// is still at least 1s, 10 of them for 11 attempts.
	require.True(t, retry.IsRetryAfterError(serverTimeout(0)))
	clk := testingclock.NewFakeClock(time.Time{})
	var rec recorder
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

func TestContextCauseWrapped(t *testing.T) {
	t.Parallel()
	shutdown := errors.New("controller shutting down")
	t.Run("canceled during a wait", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		s := conflicts(5)
		rec := recorder{hook: func() { cancel(shutdown) }}
		err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, s.ctxFn, retry.WithSleeper(&rec))
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, shutdown)
		assert.ErrorIs(t, err, s.errs[0])
		assert.Equal(t, "retry: context canceled (cause: controller shutting down) after 1 attempt, last error: "+s.errs[0].Error(), err.Error())
	})
	t.Run("deadline passed before the first attempt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithDeadlineCause(context.Background(), time.Unix(0, 0), shutdown)
		defer cancel()
		s := conflicts(5)
		err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, s.ctxFn)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, shutdown)
		assert.Zero(t, s.calls)
		assert.Equal(t, "retry: context deadline exceeded (cause: controller shutting down) before the first attempt", err.Error())
	})
	t.Run("no cause given", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(nil) // the cause is then ctx.Err() itself, named once
		err := retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, conflicts(1).ctxFn)
		assert.Equal(t, "retry: context canceled before the first attempt", err.Error())
	})
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
