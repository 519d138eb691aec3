package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
