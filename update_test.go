package retry_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestUpdateOnConflictFreshCurrentIsOneRequest(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	before := current.DeepCopyObject()
	var rec fakeSleeper

	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&rec))
	require.NoError(t, err)
	assert.Equal(t, []string{"mutate", "update"}, c.log, "no get: the first attempt works on a copy of current")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, "2", obj.ResourceVersion, "update's object is returned")
	assert.Equal(t, before, current, "current is never modified")
	assert.NotSame(t, current, obj)
	assert.Empty(t, rec.waits)
}

func TestUpdateOnConflictStaleCurrentReadsAfresh(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs") // the cache is now stale
	before := current.DeepCopyObject()
	var rec fakeSleeper

	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update,
		retry.WithSleeper(&rec), retry.WithRand(func() float64 { return 0 }))
	require.NoError(t, err)
	assert.Equal(t, []string{"mutate", "update", "get", "mutate", "update"}, c.log)
	assert.Equal(t, 100, obj.Count, "the retry worked on the object read afresh")
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, before, current, "current is never modified")
	noJitter := retry.DefaultRetry
	noJitter.Jitter = 0
	assert.Equal(t, oracleSteps(noJitter, 1), rec.waits)
}

func TestUpdateOnConflictZeroCurrentGetsFirst(t *testing.T) {
	t.Parallel()
	c := newCalls()
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, c.get, c.claim("a"), c.update)
	require.NoError(t, err)
	assert.Equal(t, []string{"get", "mutate", "update"}, c.log)
	assert.Equal(t, "a", obj.Owner)
}

func TestUpdateOnConflictSkipsNoOpWrite(t *testing.T) {
	t.Parallel()
	t.Run("first attempt", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		current.Owner = "a" // as if an earlier reconcile had set it
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update)
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate"}, c.log, "nothing changed, nothing written")
		assert.Equal(t, current, obj, "the object as current gave it")
		assert.NotSame(t, current, obj, "a copy: the caller may change it without touching the cache")
	})
	t.Run("after a conflict", func(t *testing.T) {
		t.Parallel()
		c := newCalls()
		current := c.cached(t)
		c.api.objs["jobs"].Owner = "a" // another writer already made the change
		c.api.objs["jobs"].ResourceVersion = "9"
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&fakeSleeper{}))
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate", "update", "get", "mutate"}, c.log)
		assert.Equal(t, "9", obj.ResourceVersion, "get's object")
	})
	t.Run("semantic equality", func(t *testing.T) {
		t.Parallel()
		// A nil map and an empty one are semantically equal: no write.
		c := newCalls()
		current := c.cached(t)
		obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, func(obj *Counter) error {
			c.log = append(c.log, "mutate")
			obj.Labels = map[string]string{}
			return nil
		}, c.update)
		require.NoError(t, err)
		assert.Equal(t, []string{"mutate"}, c.log)
		assert.NotNil(t, obj.Labels)
	})
}

func TestUpdateOnConflictErrorsReturnedAsIs(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "counters"}, "jobs", errors.New("no"))
	conflictErr := conflict(7)
	tests := []struct {
		name    string
		current bool // start from a cached object
		stale   bool // and change the store behind it
		setup   func(c *calls) (mutate func(*Counter) error, want error)
		wantLog []string
	}{
		{
			name: "get's error",
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{forbidden}
				return c.claim("a"), forbidden
			},
			wantLog: []string{"get"},
		},
		{
			name: "get's Conflict is not retried",
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{conflictErr}
				return c.claim("a"), conflictErr
			},
			wantLog: []string{"get"},
		},
		{
			name: "get's error on a retry", current: true, stale: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.failGets = []error{forbidden}
				return c.claim("a"), forbidden
			},
			wantLog: []string{"mutate", "update", "get"},
		},
		{
			name: "mutate's error, nothing written", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				return func(obj *Counter) error {
					c.log = append(c.log, "mutate")
					obj.Owner = "half-done"
					return forbidden
				}, forbidden
			},
			wantLog: []string{"mutate"},
		},
		{
			name: "mutate's Conflict is not retried", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				return func(*Counter) error { c.log = append(c.log, "mutate"); return conflictErr }, conflictErr
			},
			wantLog: []string{"mutate"},
		},
		{
			name: "update's error other than Conflict", current: true,
			setup: func(c *calls) (func(*Counter) error, error) {
				c.api.beforeUpdate = func() { delete(c.api.objs, "jobs") }
				return c.claim("a"), nil // a NotFound, checked below
			},
			wantLog: []string{"mutate", "update"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCalls()
			var current *Counter
			if tt.current {
				current = c.cached(t)
			}
			if tt.stale {
				c.api.touch("jobs")
			}
			mutate, want := tt.setup(c)
			written := c.api.version
			var rec fakeSleeper
			obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, mutate, c.update, retry.WithSleeper(&rec))
			if want != nil {
				assert.Same(t, want, err)
			} else {
				assert.True(t, apierrors.IsNotFound(err), "update's NotFound as is, got %v", err)
			}
			assert.Nil(t, obj, "the zero T with an error")
			assert.Equal(t, tt.wantLog, c.log)
			assert.Equal(t, written, c.api.version, "nothing written")
			if tt.current {
				assert.Empty(t, current.Owner, "current is never modified")
			}
		})
	}
}

func TestUpdateOnConflictExhaustion(t *testing.T) {
	t.Parallel()
	c := newCalls()
	var last error
	c.api.beforeUpdate = func() { c.api.touch("jobs") } // every write loses the race
	update := func(ctx context.Context, obj *Counter) (*Counter, error) {
		out, err := c.update(ctx, obj)
		last = err
		return out, err
	}
	var rec fakeSleeper
	b := retry.Backoff{Steps: 3, Duration: time.Second, Factor: 2}
	obj, err := retry.UpdateOnConflict(context.Background(), b, nil, c.get, c.claim("a"), update, retry.WithSleeper(&rec))
	require.True(t, apierrors.IsConflict(err))
	assert.Same(t, last, err, "the last Conflict itself")
	assert.Nil(t, obj)
	assert.Equal(t, []string{"get", "mutate", "update", "get", "mutate", "update", "get", "mutate", "update"}, c.log)
	assert.Equal(t, oracleSteps(b, 2), rec.waits)
}

func TestUpdateOnConflictNilGetWithCurrent(t *testing.T) {
	t.Parallel()
	// With no get, nothing could read the object afresh: a Conflict on the
	// first attempt is returned as it is, without a wait.
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs")
	var rec fakeSleeper
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, nil, c.claim("a"), c.update, retry.WithSleeper(&rec))
	assert.True(t, apierrors.IsConflict(err))
	assert.Nil(t, obj)
	assert.Equal(t, []string{"mutate", "update"}, c.log)
	assert.Empty(t, rec.waits)

	// And without a Conflict it writes as usual.
	c = newCalls()
	obj, err = retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, c.cached(t), nil, c.claim("a"), c.update)
	require.NoError(t, err)
	assert.Equal(t, "a", obj.Owner)
}

func TestUpdateOnConflictGetReturnsNothing(t *testing.T) {
	t.Parallel()
	called := false
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil,
		func(context.Context) (*Counter, error) { return nil, nil },
		func(*Counter) error { called = true; return nil },
		func(context.Context, *Counter) (*Counter, error) { called = true; return nil, nil })
	require.Error(t, err)
	assert.Equal(t, "retry: get returned neither an object nor an error", err.Error())
	assert.Nil(t, obj)
	assert.False(t, called, "mutate and update are not called")
}

func TestUpdateOnConflictRejectsBadInput(t *testing.T) {
	t.Parallel()
	c := newCalls()
	current := c.cached(t)
	var nilCtx context.Context
	tests := []struct {
		name string
		run  func() (*Counter, error)
		want string // the message names what is wrong
	}{
		{"nil get and zero current", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, nil, c.claim("a"), c.update)
		}, "get is nil"},
		{"nil mutate", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, nil, c.update)
		}, "mutate is nil"},
		{"nil update", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, c.claim("a"), nil)
		}, "update is nil"},
		{"nil ctx", func() (*Counter, error) {
			return retry.UpdateOnConflict(nilCtx, retry.DefaultRetry, current, c.get, c.claim("a"), c.update)
		}, "ctx is nil"},
		{"zero Backoff", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.Backoff{}, current, c.get, c.claim("a"), c.update)
		}, "Steps 0"},
		{"NaN Factor", func() (*Counter, error) {
			return retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 2, Factor: math.NaN()}, current, c.get, c.claim("a"), c.update)
		}, "Factor NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj *Counter
			var err error
			require.NotPanics(t, func() { obj, err = tt.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			assert.Nil(t, obj)
		})
	}
	assert.Empty(t, c.log, "nothing called")
	assert.Zero(t, c.api.gets+c.api.updates)
}

func TestUpdateOnConflictContextEndsBetweenAttempts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	shutdown := errors.New("controller shutting down")
	c := newCalls()
	current := c.cached(t)
	c.api.touch("jobs")
	rec := fakeSleeper{hook: func(time.Duration) { cancel(shutdown) }}
	obj, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, current, c.get, c.claim("a"), c.update, retry.WithSleeper(&rec))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, shutdown)
	assert.True(t, apierrors.IsConflict(err), "the last Conflict is wrapped too")
	assert.Nil(t, obj)
	assert.Equal(t, []string{"mutate", "update"}, c.log, "no attempt after ctx ended")
	assert.Len(t, rec.waits, 1)
}

func TestUpdateOnConflictOptions(t *testing.T) {
	t.Parallel()
	// The loop's options apply: every wait bounded, every retry reported.
	c := newCalls()
	c.api.beforeUpdate = func() {
		if c.api.updates < 3 {
			c.api.touch("jobs")
		}
	}
	var rec fakeSleeper
	var events []retry.RetryEvent
	obj, err := retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 5, Duration: time.Second, Factor: 10}, nil,
		c.get, c.claim("a"), c.update,
		retry.WithSleeper(&rec), retry.WithMaxDelay(3*time.Second),
		retry.WithOnRetry(func(e retry.RetryEvent) { events = append(events, e) }))
	require.NoError(t, err)
	assert.Equal(t, "a", obj.Owner)
	assert.Equal(t, 200, obj.Count)
	assert.Equal(t, []time.Duration{time.Second, 3 * time.Second}, rec.waits)
	require.Len(t, events, 2)
	for i, e := range events {
		assert.Equal(t, i+1, e.Attempt)
		assert.True(t, apierrors.IsConflict(e.Err))
	}
}

// syncCounters is counters behind a lock, for concurrent callers.
type syncCounters struct {
	mu  sync.Mutex
	api *counters
}

func (s *syncCounters) get(ctx context.Context) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.Get(ctx, "jobs")
}

func (s *syncCounters) update(ctx context.Context, obj *Counter) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.Update(ctx, obj)
}

func TestUpdateOnConflictSharedCurrent(t *testing.T) {
	t.Parallel()
	// Many workers start from one cached object, as from one informer: with
	// the race detector on, a write to it would be reported.
	s := &syncCounters{api: newCounters("jobs")}
	current, err := s.get(context.Background())
	require.NoError(t, err)
	const workers = 8
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wgGo(&wg, func() {
			_, errs[i] = retry.UpdateOnConflict(context.Background(), retry.Backoff{Steps: 50}, current, s.get,
				func(obj *Counter) error {
					obj.Count++
					obj.Labels = map[string]string{"by": strconv.Itoa(i)}
					return nil
				},
				s.update, retry.WithSleeper(&fakeSleeper{}))
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, workers, s.api.objs["jobs"].Count, "every increment landed once")
	assert.Equal(t, &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "1"}}, current)
}

func TestUpdateOnConflictDeepCopyOfAnotherType(t *testing.T) {
	t.Parallel()
	want := "retry: DeepCopyObject of a *retry_test.badCopy returned a *retry_test.Counter"
	for name, current := range map[string]*badCopy{"current": {}, "get": nil} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current,
				func(context.Context) (*badCopy, error) { return &badCopy{}, nil },
				func(*badCopy) error { calls++; return nil },
				func(_ context.Context, o *badCopy) (*badCopy, error) { calls++; return o, nil })
			require.Error(t, err)
			assert.Equal(t, want, err.Error())
			assert.Nil(t, obj)
			assert.Zero(t, calls, "neither mutate nor update is called")
		})
	}
}

func TestUpdateOnConflictComparesWithACopy(t *testing.T) {
	t.Parallel()
	// A mutate that also writes the cached object through another reference
	// (a bug of the caller's) must not make its change look like a no-op.
	c := newCalls()
	current := c.cached(t)
	obj, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, c.get, func(obj *Counter) error {
		obj.Owner = "a"
		current.Owner = "a"
		return nil
	}, c.update)
	require.NoError(t, err)
	assert.Equal(t, 1, c.api.updates, "the change was written")
	assert.Equal(t, "a", obj.Owner)
}
