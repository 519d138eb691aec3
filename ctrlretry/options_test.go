package ctrlretry_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// alwaysConflicts is another writer that changes the object before every
// update, so every update meets a Conflict.
func alwaysConflicts(ctx context.Context, under client.WithWatch, obj client.Object, _ int) error {
	return otherUpdates(ctx, under, obj, 1)
}

// TestBackoff: the loop waits and stops as the root loop does with the
// same backoff and options: retry.DefaultRetry by default, WithBackoff's
// otherwise.
func TestBackoff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		opts    []ctrlretry.Option
		backoff retry.Backoff
	}{
		{name: "default", backoff: retry.DefaultRetry},
		{name: "WithBackoff", opts: []ctrlretry.Option{ctrlretry.WithBackoff(retry.Backoff{Steps: 3, Duration: time.Second, Factor: 2})},
			backoff: retry.Backoff{Steps: 3, Duration: time.Second, Factor: 2}},
		{name: "the later WithBackoff wins", opts: []ctrlretry.Option{
			ctrlretry.WithBackoff(retry.Backoff{Steps: 9, Duration: time.Hour}),
			ctrlretry.WithBackoff(retry.DefaultBackoff)},
			backoff: retry.DefaultBackoff},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The root loop's waits, for a conflict every attempt.
			root := newInstant()
			attempts := 0
			err := retry.RetryOnConflictWithContext(testContext(t), c.backoff, func(context.Context) error {
				attempts++
				return conflictOf("cm")
			}, root.loopOptions()...)
			if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}

			fc := newFake(hooks{update: alwaysConflicts}, storedConfigMap()...)
			in := newInstant()
			obj := seedConfigMap()
			_, err = ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj), append(c.opts, in.option())...)
			if !apierrors.IsConflict(err) {
				t.Errorf("returned %v, want a Conflict", err)
			}
			if in.attempts != attempts || !reflect.DeepEqual(in.waits, root.waits) {
				t.Errorf("%d attempts, waits %v; the root loop makes %d, waits %v", in.attempts, in.waits, attempts, root.waits)
			}
			if updates := strings.Count(join(fc.Calls()), "update"); updates != attempts {
				t.Errorf("%d updates in %d attempts", updates, attempts)
			}
		})
	}
}

// TestReaderAfterFailureOnly: the reader is read only by retries.
func TestReaderAfterFailureOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		h     hooks
		reads int
	}{
		{name: "no race", reads: 0},
		{name: "one Conflict", h: hooks{update: otherUpdates}, reads: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fc := newFake(c.h, storedConfigMap()...)
			r := newLaggingReader(t, fc.under, "cm", 0)
			obj := seedConfigMap()
			if _, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj), ctrlretry.WithReader(r), newInstant().option()); err != nil {
				t.Fatal(err)
			}
			if reads := len(r.Reads()); reads != c.reads {
				t.Errorf("%d reads through the reader, want %d", reads, c.reads)
			}
			if gets := strings.Count(join(fc.Calls()), "get"); gets != 1 {
				t.Errorf("%d gets through the client, want 1", gets)
			}
		})
	}
}

// TestLoopOptions: the root loop's context and budget rules hold.
func TestLoopOptions(t *testing.T) {
	t.Parallel()
	t.Run("ctx cancelled during a Conflict", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		cancelling := func(ctx context.Context, under client.WithWatch, obj client.Object, n int) error {
			cancel()
			return otherUpdates(ctx, under, obj, n)
		}
		fc := newFake(hooks{update: cancelling}, storedConfigMap()...)
		in := newInstant()
		obj := seedConfigMap()
		_, err := ctrlretry.CreateOrUpdate(ctx, fc, obj, setK(obj), in.option())
		if !errors.Is(err, context.Canceled) || !apierrors.IsConflict(err) {
			t.Errorf("returned %v, want an error matching context.Canceled and the Conflict", err)
		}
		if in.attempts != 1 || len(in.waits) != 0 {
			t.Errorf("%d attempts, waits %v; want 1, none", in.attempts, in.waits)
		}
	})
	t.Run("budget refuses the retry", func(t *testing.T) {
		t.Parallel()
		budget := &retry.Budget{Window: time.Second, Clock: testclock.NewFakeClock(time.Unix(0, 0))} // no retry at all
		fc := newFake(hooks{update: otherUpdates}, storedConfigMap()...)
		in := newInstant()
		obj := seedConfigMap()
		op, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj), in.option(), ctrlretry.WithLoopOptions(retry.WithBudget(budget)))
		if !errors.Is(err, retry.ErrBudgetExhausted) || !apierrors.IsConflict(err) || op != controllerutil.OperationResultNone {
			t.Errorf("returned (%q, %v), want none and an error matching ErrBudgetExhausted and the Conflict", op, err)
		}
		if in.attempts != 1 || len(in.waits) != 0 {
			t.Errorf("%d attempts, waits %v; want 1, none", in.attempts, in.waits)
		}
	})
	t.Run("WithLoopOptions add up", func(t *testing.T) {
		t.Parallel()
		fc := newFake(hooks{update: otherUpdates}, storedConfigMap()...)
		clock := testclock.NewFakeClock(time.Unix(0, 0))
		var retries, dones int
		obj := seedConfigMap()
		_, err := ctrlretry.CreateOrUpdate(testContext(t), fc, obj, setK(obj),
			ctrlretry.WithLoopOptions(retry.WithSleeper(clock)),
			ctrlretry.WithLoopOptions(retry.WithOnRetry(func(retry.RetryEvent) { retries++ })),
			ctrlretry.WithLoopOptions(retry.WithOnDone(func(retry.DoneEvent) { dones++ })),
			ctrlretry.Option{})
		if err != nil || retries != 1 || dones != 1 || clock.Since(time.Unix(0, 0)) <= 0 {
			t.Errorf("returned %v, %d retries, %d dones, slept %v on the fake clock; want nil, 1, 1 and a wait",
				err, retries, dones, clock.Since(time.Unix(0, 0)))
		}
	})
}

// valueObject is a client.Object that is not a pointer: nothing can be
// read into it.
type valueObject struct{ *corev1.ConfigMap }

// otherCopy is a client.Object whose DeepCopyObject returns a ConfigMap.
type otherCopy struct{ corev1.ConfigMap }

// TestBadInput: a clear error naming the argument, and nothing called.
func TestBadInput(t *testing.T) {
	t.Parallel()
	var nilConfigMap *corev1.ConfigMap
	cases := []struct {
		name string
		ctx  context.Context
		c    bool // pass the fake client, else nil
		obj  client.Object
		opts []ctrlretry.Option
		want string
	}{
		{name: "nil c", ctx: context.Background(), obj: seedConfigMap(), want: "retry: ctrlretry.%s: c is nil"},
		{name: "nil obj", ctx: context.Background(), c: true, want: "retry: ctrlretry.%s: obj is nil"},
		{name: "typed nil obj", ctx: context.Background(), c: true, obj: nilConfigMap, want: "retry: ctrlretry.%s: obj is a nil *v1.ConfigMap"},
		{name: "obj not a pointer", ctx: context.Background(), c: true, obj: valueObject{seedConfigMap().(*corev1.ConfigMap)},
			want: "retry: ctrlretry.%s: obj, a ctrlretry_test.valueObject, is not a pointer"},
		{name: "obj's copy of another type", ctx: context.Background(), c: true, obj: &otherCopy{},
			want: "retry: ctrlretry.%s: obj's DeepCopyObject returned a *v1.ConfigMap, not a *ctrlretry_test.otherCopy"},
		{name: "nil ctx", c: true, obj: seedConfigMap(), want: "retry: ctx is nil"},
		{name: "invalid backoff", ctx: context.Background(), c: true, obj: seedConfigMap(),
			opts: []ctrlretry.Option{ctrlretry.WithBackoff(retry.Backoff{Steps: 0})}, want: retry.Backoff{Steps: 0}.Validate().Error()},
		{name: "invalid budget", ctx: context.Background(), c: true, obj: seedConfigMap(),
			opts: []ctrlretry.Option{ctrlretry.WithLoopOptions(retry.WithBudget(&retry.Budget{}))}, want: (&retry.Budget{}).Validate().Error()},
	}
	for _, p := range pairs {
		for _, c := range cases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				fc := newFake(hooks{}, storedConfigMap()...)
				var cl client.Client
				if c.c {
					cl = fc
				}
				called := false
				f := func() error { called = true; return nil }
				_, err := p.retrying(c.opts...)(c.ctx, cl, c.obj, f)
				want := strings.Replace(c.want, "%s", p.name, 1)
				if err == nil || err.Error() != want {
					t.Errorf("returned %v, want %q", err, want)
				}
				if calls := fc.Calls(); len(calls) > 0 || called {
					t.Errorf("calls %s, MutateFn called %v; want nothing called", join(calls), called)
				}
			})
		}
	}
}
