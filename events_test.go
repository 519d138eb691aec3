package retry_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// TestWithOnDoneEveryLoop: every loop reports its end once, after its
// last OnRetry, with the attempts it made and the error it returns.
func TestWithOnDoneEveryLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		succeedAt int
		attempts  int
		exhausted bool
	}{
		{"success at once", 1, 1, false},
		{"success after conflicts", 3, 3, false},
		{"exhausted", 0, loopBackoff.Steps, true},
	}
	for loop, run := range everyLoop() {
		for _, tt := range tests {
			t.Run(loop+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := hooks{succeedAt: tt.succeedAt}
				err := run(&h)
				require.Len(t, h.done, 1)
				assert.Equal(t, retry.DoneEvent{Attempts: tt.attempts, Err: err, Exhausted: tt.exhausted}, h.done[0])
				if tt.exhausted {
					require.Len(t, h.errs, tt.attempts)
					assert.Same(t, h.errs[tt.attempts-1], err, "the last Conflict itself")
				} else {
					assert.NoError(t, err)
				}
				assert.Equal(t, tt.attempts-1, h.retries)
				assert.Equal(t, "done", h.order[len(h.order)-1], "OnDone comes last")
			})
		}
	}
}

// TestWithOnDoneOutcomes: Attempts, Err and Exhausted for every way a loop
// ends.
func TestWithOnDoneOutcomes(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(counterResource, "jobs", errors.New("no"))
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	type outcome struct {
		attempts  int
		exhausted bool
		is        []error // the returned error must match each
	}
	tests := []struct {
		name string
		// run calls a loop with opts and returns its fn's script (the
		// errors of its attempts and their number) and the loop's error.
		run  func(opts ...retry.Option) (*script, error)
		want outcome
	}{
		{"success", func(opts ...retry.Option) (*script, error) {
			s := &script{errs: []error{nil}}
			return s, retry.OnError(retry.DefaultRetry, apierrors.IsConflict, s.fn, opts...)
		}, outcome{attempts: 1}},
		{"success after two conflicts", func(opts ...retry.Option) (*script, error) {
			s := &script{errs: []error{conflict(1), conflict(2), nil}}
			return s, retry.OnError(retry.DefaultRetry, apierrors.IsConflict, s.fn, opts...)
		}, outcome{attempts: 3}},
		{"non-retriable", func(opts ...retry.Option) (*script, error) {
			s := &script{errs: []error{conflict(1), forbidden}}
			return s, retry.OnError(retry.DefaultRetry, apierrors.IsConflict, s.fn, opts...)
		}, outcome{attempts: 2, is: []error{forbidden}}},
		{"exhausted by Steps", func(opts ...retry.Option) (*script, error) {
			s := conflicts(3)
			return s, retry.RetryOnConflict(retry.Backoff{Steps: 3, Duration: time.Millisecond}, s.fn, opts...)
		}, outcome{attempts: 3, exhausted: true}},
		{"exhausted by Cap", func(opts ...retry.Option) (*script, error) {
			// 1s, then 2s at the Cap: the loop returns after that wait.
			s := conflicts(10)
			return s, retry.RetryOnConflict(retry.Backoff{Steps: 10, Duration: time.Second, Factor: 2, Cap: 3 * time.Second}, s.fn, opts...)
		}, outcome{attempts: 2, exhausted: true}},
		{"exhausted by Steps at the Cap under WithContinueAtCap", func(opts ...retry.Option) (*script, error) {
			s := conflicts(10)
			opts = append(opts, retry.WithContinueAtCap())
			return s, retry.RetryOnConflict(retry.Backoff{Steps: 6, Duration: time.Second, Factor: 2, Cap: 3 * time.Second}, s.fn, opts...)
		}, outcome{attempts: 6, exhausted: true}},
		{"ctx done before the first attempt", func(opts ...retry.Option) (*script, error) {
			s := conflicts(1)
			return s, retry.RetryOnConflictWithContext(cancelled(), retry.DefaultRetry, s.ctxFn, opts...)
		}, outcome{attempts: 0, is: []error{context.Canceled}}},
		{"ctx ends during a wait", func(opts ...retry.Option) (*script, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := conflicts(5)
			opts = append(opts, retry.WithSleeper(&fakeSleeper{hook: func(time.Duration) {
				if s.calls == 2 {
					cancel()
				}
			}}))
			return s, retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, s.ctxFn, opts...)
		}, outcome{attempts: 2, is: []error{context.Canceled}}},
		{"ctx ends during the capped final wait", func(opts ...retry.Option) (*script, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := conflicts(5)
			opts = append(opts, retry.WithSleeper(&fakeSleeper{hook: func(time.Duration) { cancel() }}))
			return s, retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 5, Duration: time.Second, Factor: 2, Cap: time.Second}, s.ctxFn, opts...)
		}, outcome{attempts: 1, is: []error{context.Canceled}}},
		{"wait past the deadline", func(opts ...retry.Option) (*script, error) {
			// The default sleeper does not start it: nothing sleeps.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			s := conflicts(5)
			opts = append(opts, retry.WithSleeper(nil))
			return s, retry.RetryOnConflictWithContext(ctx, retry.Backoff{Steps: 5, Duration: 2 * time.Hour}, s.ctxFn, opts...)
		}, outcome{attempts: 1, is: []error{context.DeadlineExceeded}}},
		{"budget refusal", func(opts ...retry.Option) (*script, error) {
			s := conflicts(5)
			b := &retry.Budget{Window: time.Second, Clock: testingclock.NewFakeClock(t0)}
			opts = append(opts, retry.WithBudget(b))
			return s, retry.RetryOnConflict(retry.DefaultRetry, s.fn, opts...)
		}, outcome{attempts: 1, is: []error{retry.ErrBudgetExhausted}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var done []retry.DoneEvent
			s, err := tt.run(
				retry.WithSleeper(&fakeSleeper{}), // replaced by a later WithSleeper
				retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
			require.Len(t, done, 1)
			assert.Equal(t, tt.want.attempts, done[0].Attempts)
			assert.Equal(t, tt.want.attempts, s.calls, "Attempts is the calls of fn")
			assert.Equal(t, tt.want.exhausted, done[0].Exhausted)
			assert.True(t, err == done[0].Err, "Err is the error returned: %v, %v", err, done[0].Err)
			for _, target := range tt.want.is {
				assert.ErrorIs(t, err, target)
			}
			if tt.want.exhausted {
				assert.Same(t, s.errs[tt.want.attempts-1], err)
			}
			if tt.want.attempts > 0 && len(tt.want.is) > 0 && !errors.Is(err, forbidden) {
				assert.ErrorIs(t, err, s.errs[tt.want.attempts-1], "the last attempt's error is wrapped")
			}
		})
	}
}

// TestWithOnDoneWriteLoops: an error met during an attempt of
// UpdateOnConflict or CreateOrUpdate ends the loop like a non-retriable
// error, and OnDone is called with it; so do their other outcomes.
func TestWithOnDoneWriteLoops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errMutate := errors.New("mutate: invalid spec")
	type loop func(api *counters, get func(context.Context) (*Counter, error), mutate func(*Counter) error, opts ...retry.Option) error
	update := func(api *counters, get func(context.Context) (*Counter, error), mutate func(*Counter) error, opts ...retry.Option) error {
		_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, get, mutate, api.Update, opts...)
		return err
	}
	createOrUpdate := func(api *counters, get func(context.Context) (*Counter, error), mutate func(*Counter) error, opts ...retry.Option) error {
		_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, mutate, api.Create, api.Update, opts...)
		return err
	}
	tests := []struct {
		name     string
		names    []string // the objects in the store
		get      func(api *counters) func(context.Context) (*Counter, error)
		mutate   func(*Counter) error
		setup    func(api *counters)
		attempts int
		check    func(t *testing.T, err error)
	}{
		{"mutate fails", []string{"jobs"}, nil, func(*Counter) error { return errMutate }, nil, 1,
			func(t *testing.T, err error) { assert.Same(t, errMutate, err) }},
		{"mutate renames", []string{"jobs"}, nil, func(c *Counter) error { c.Name = "other"; return nil }, nil, 1,
			func(t *testing.T, err error) {
				assert.ErrorContains(t, err, `retry: mutate changed the object's key from "jobs" to "other"`)
			}},
		{"mutate renames on the create path", nil, nil, func(c *Counter) error { c.Name = "other"; return nil }, nil, 1,
			func(t *testing.T, err error) { assert.ErrorContains(t, err, `from "jobs" to "other"`) }},
		{"get returns nothing", []string{"jobs"}, func(*counters) func(context.Context) (*Counter, error) {
			return func(context.Context) (*Counter, error) { return nil, nil }
		}, func(c *Counter) error { c.Owner = "a"; return nil }, nil, 1,
			func(t *testing.T, err error) {
				assert.ErrorContains(t, err, "retry: get returned neither an object nor an error")
			}},
		{"no change", []string{"jobs"}, nil, func(*Counter) error { return nil }, nil, 1,
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"update after a conflict", []string{"jobs"}, nil, func(c *Counter) error { c.Owner = "a"; return nil },
			func(api *counters) {
				api.beforeUpdate = func() {
					if api.updates == 1 {
						api.touch("jobs")
					}
				}
			}, 2, func(t *testing.T, err error) { assert.NoError(t, err) }},
	}
	for name, run := range map[string]loop{"UpdateOnConflict": update, "CreateOrUpdate": createOrUpdate} {
		for _, tt := range tests {
			if tt.names == nil && name != "CreateOrUpdate" {
				continue // the create path is CreateOrUpdate's
			}
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				api := newCounters(tt.names...)
				if tt.setup != nil {
					tt.setup(api)
				}
				get := func(ctx context.Context) (*Counter, error) { return api.Get(ctx, "jobs") }
				if tt.get != nil {
					get = tt.get(api)
				}
				var done []retry.DoneEvent
				err := run(api, get, tt.mutate, retry.WithSleeper(&fakeSleeper{}),
					retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
				tt.check(t, err)
				require.Len(t, done, 1)
				assert.Equal(t, retry.DoneEvent{Attempts: tt.attempts, Err: err}, done[0])
			})
		}
	}

	// CreateOrUpdate exhausted by writers that create the object first
	// every time: the last AlreadyExists, and Exhausted.
	api := newCounters()
	api.beforeCreate = func() { api.objs["jobs"] = &Counter{ObjectMeta: metav1.ObjectMeta{Name: "jobs", ResourceVersion: "9"}} }
	gets := 0
	get := func(ctx context.Context) (*Counter, error) {
		gets++
		delete(api.objs, "jobs") // and deleted again before each read
		return api.Get(ctx, "jobs")
	}
	var done []retry.DoneEvent
	_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, func(*Counter) error { return nil },
		api.Create, api.Update, retry.WithSleeper(&fakeSleeper{}), retry.WithOnDone(func(e retry.DoneEvent) { done = append(done, e) }))
	require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	require.Len(t, done, 1)
	assert.Equal(t, retry.DoneEvent{Attempts: retry.DefaultRetry.Steps, Err: err, Exhausted: true}, done[0])
	assert.Equal(t, retry.DefaultRetry.Steps, gets)
}

// TestWithOnDoneNotCalledForBadInput: a loop that returns an error for an
// invalid argument has not started: no OnDone.
func TestWithOnDoneNotCalledForBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var nilCtx context.Context
	calls := 0
	fn := func() error { calls++; return nil }
	ctxFn := func(context.Context) error { calls++; return nil }
	get := func(context.Context) (*Counter, error) { calls++; return &Counter{}, nil }
	mutate := func(*Counter) error { calls++; return nil }
	write := func(context.Context, *Counter) (*Counter, error) { calls++; return &Counter{}, nil }
	bad := retry.Backoff{Steps: 3, Factor: math.NaN()}
	var done []string
	tests := map[string]func(opts ...retry.Option) error{
		"OnError bad backoff":         func(o ...retry.Option) error { return retry.OnError(bad, always, fn, o...) },
		"OnError nil fn":              func(o ...retry.Option) error { return retry.OnError(retry.DefaultRetry, always, nil, o...) },
		"OnError nil retriable":       func(o ...retry.Option) error { return retry.OnError(retry.DefaultRetry, nil, fn, o...) },
		"RetryOnConflict bad backoff": func(o ...retry.Option) error { return retry.RetryOnConflict(retry.Backoff{}, fn, o...) },
		"OnRetryAfterError nil fn":    func(o ...retry.Option) error { return retry.OnRetryAfterError(retry.DefaultRetry, always, nil, o...) },
		"OnErrorWithContext nil ctx": func(o ...retry.Option) error {
			return retry.OnErrorWithContext(nilCtx, retry.DefaultRetry, always, ctxFn, o...)
		},
		"OnErrorWithContext nil fn": func(o ...retry.Option) error {
			return retry.OnErrorWithContext(ctx, retry.DefaultRetry, always, nil, o...)
		},
		"RetryOnConflictWithContext ctx": func(o ...retry.Option) error {
			return retry.RetryOnConflictWithContext(nilCtx, retry.DefaultRetry, ctxFn, o...)
		},
		"OnErrorValue nil fn": func(o ...retry.Option) error {
			_, err := retry.OnErrorValue[int](ctx, retry.DefaultRetry, always, nil, o...)
			return err
		},
		"OnErrorValue nil ctx": func(o ...retry.Option) error {
			_, err := retry.OnErrorValue(nilCtx, retry.DefaultRetry, always, func(context.Context) (int, error) { calls++; return 0, nil }, o...)
			return err
		},
		"OnErrorValue nil retriable": func(o ...retry.Option) error {
			_, err := retry.OnErrorValue(ctx, retry.DefaultRetry, nil, func(context.Context) (int, error) { calls++; return 0, nil }, o...)
			return err
		},
		"OnError nil budget": func(o ...retry.Option) error {
			return retry.OnError(retry.DefaultRetry, always, fn, append(o, retry.WithBudget(nil))...)
		},
		"OnError bad budget": func(o ...retry.Option) error {
			return retry.OnError(retry.DefaultRetry, always, fn, append(o, retry.WithBudget(&retry.Budget{}))...)
		},
		"Update bad backoff": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(ctx, bad, nil, get, mutate, write, o...)
			return err
		},
		"Update nil ctx": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(nilCtx, retry.DefaultRetry, nil, get, mutate, write, o...)
			return err
		},
		"Update nil mutate": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, get, nil, write, o...)
			return err
		},
		"Update nil update": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, get, mutate, nil, o...)
			return err
		},
		"Update nothing": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, nil, mutate, write, o...)
			return err
		},
		"Update bad budget": func(o ...retry.Option) error {
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, get, mutate, write, append(o, retry.WithBudget(nil))...)
			return err
		},
		"Create zero current": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, nil, get, mutate, write, write, o...)
			return err
		},
		"Create nil get": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), nil, mutate, write, write, o...)
			return err
		},
		"Create nil mutate": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, nil, write, write, o...)
			return err
		},
		"Create nil create": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, mutate, nil, write, o...)
			return err
		},
		"Create nil update": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, mutate, write, nil, o...)
			return err
		},
		"Create nil ctx": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(nilCtx, retry.DefaultRetry, desired(), get, mutate, write, write, o...)
			return err
		},
		"Create no metadata": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, &noMeta{},
				func(context.Context) (*noMeta, error) { calls++; return nil, nil },
				func(*noMeta) error { calls++; return nil },
				func(context.Context, *noMeta) (*noMeta, error) { calls++; return nil, nil },
				func(context.Context, *noMeta) (*noMeta, error) { calls++; return nil, nil }, o...)
			return err
		},
		"Create bad backoff": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, bad, desired(), get, mutate, write, write, o...)
			return err
		},
		"Create bad budget": func(o ...retry.Option) error {
			_, _, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), get, mutate, write, write, append(o, retry.WithBudget(&retry.Budget{Ratio: -1, Window: 1}))...)
			return err
		},
	}
	for name, run := range tests {
		err := run(retry.WithOnDone(func(retry.DoneEvent) { done = append(done, name) }))
		assert.ErrorContains(t, err, "retry: ", name)
	}
	assert.Empty(t, done, "OnDone for an invalid argument")
	assert.Zero(t, calls, "a function was called for an invalid argument")
}

// TestWithOnDoneNotCalledOnPanic: a panic in fn, the predicate, a write
// loop's function or a hook leaves the loop unchanged, without OnDone.
func TestWithOnDoneNotCalledOnPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type boom struct{}
	explode := func() { panic(boom{}) }
	api := func() *counters { return newCounters("jobs") }
	tests := map[string]func(opts ...retry.Option){
		"fn": func(o ...retry.Option) {
			_ = retry.OnError(retry.DefaultRetry, always, func() error { explode(); return nil }, o...)
		},
		"retriable": func(o ...retry.Option) {
			_ = retry.OnError(retry.DefaultRetry, func(error) bool { explode(); return true }, func() error { return errDown }, o...)
		},
		"OnRetry": func(o ...retry.Option) {
			_ = retry.OnError(retry.DefaultRetry, always, func() error { return errDown }, append(o, retry.WithOnRetry(func(retry.RetryEvent) { explode() }))...)
		},
		"sleeper": func(o ...retry.Option) {
			_ = retry.OnError(retry.DefaultRetry, always, func() error { return errDown }, append(o, retry.WithSleeper(&fakeSleeper{hook: func(time.Duration) { explode() }}))...)
		},
		"OnErrorValue fn": func(o ...retry.Option) {
			_, _ = retry.OnErrorValue(ctx, retry.DefaultRetry, always, func(context.Context) (int, error) { explode(); return 0, nil }, o...)
		},
		"get": func(o ...retry.Option) {
			a := api()
			_, _ = retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, func(context.Context) (*Counter, error) { explode(); return nil, nil },
				func(*Counter) error { return nil }, a.Update, o...)
		},
		"mutate": func(o ...retry.Option) {
			a := api()
			_, _ = retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, func(ctx context.Context) (*Counter, error) { return a.Get(ctx, "jobs") },
				func(*Counter) error { explode(); return nil }, a.Update, o...)
		},
		"update": func(o ...retry.Option) {
			a := api()
			_, _, _ = retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), func(ctx context.Context) (*Counter, error) { return a.Get(ctx, "jobs") },
				func(c *Counter) error { c.Owner = "a"; return nil }, a.Create,
				func(context.Context, *Counter) (*Counter, error) { explode(); return nil, nil }, o...)
		},
		"create": func(o ...retry.Option) {
			a := newCounters()
			_, _, _ = retry.CreateOrUpdate(ctx, retry.DefaultRetry, desired(), func(ctx context.Context) (*Counter, error) { return a.Get(ctx, "jobs") },
				func(*Counter) error { return nil },
				func(context.Context, *Counter) (*Counter, error) { explode(); return nil, nil }, a.Update, o...)
		},
	}
	for name, run := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			done := 0
			assert.PanicsWithValue(t, boom{}, func() {
				run(retry.WithSleeper(&fakeSleeper{}), retry.WithOnDone(func(retry.DoneEvent) { done++ }))
			})
			assert.Zero(t, done)
		})
	}
}

func TestWithOnRetry(t *testing.T) {
	t.Parallel()
	s := &script{errs: []error{conflict(1), throttled(7), conflict(3), nil}}
	var events []retry.RetryEvent
	var rec fakeSleeper
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
			var rec fakeSleeper
			_ = retry.RetryOnConflict(retry.Backoff{Steps: 1}, (&script{errs: errs}).fn,
				retry.WithSleeper(&rec), retry.WithOnRetry(func(retry.RetryEvent) { called++ }))
			assert.Zero(t, called)
			assert.Empty(t, rec.waits)
		})
	}
}

func BenchmarkOnErrorSuccessWithOnDone(b *testing.B) {
	b.ReportAllocs()
	var done atomic.Int64
	onDone := func(retry.DoneEvent) { done.Add(1) }
	fn := func() error { return nil }
	calls := int64(0)
	b.ResetTimer()
	for range b.N {
		sink = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn, retry.WithOnDone(onDone))
		calls++
	}
	if sink != nil || done.Load() != calls {
		b.Fatalf("got %v and %d events for %d calls", sink, done.Load(), calls)
	}
}

func BenchmarkOnErrorSuccessWithOnDoneParallel(b *testing.B) {
	b.ReportAllocs()
	var done, calls atomic.Int64
	onDone := func(retry.DoneEvent) { done.Add(1) }
	fn := func() error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		n := int64(0)
		for pb.Next() {
			if err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn, retry.WithOnDone(onDone)); err != nil {
				b.Error(err)
			}
			n++
		}
		calls.Add(n)
	})
	if done.Load() != calls.Load() {
		b.Fatalf("%d events for %d calls", done.Load(), calls.Load())
	}
}
