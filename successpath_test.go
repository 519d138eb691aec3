package retry_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kuberetry/retry"
)

// The success path with a Budget and with OnDone: one first attempt
// deposited under the Budget's mutex, one hook call. The Budget reads real
// time (Clock nil), as in production.

// benchBudget is Finagle's defaults.
func benchBudget() *retry.Budget {
	return &retry.Budget{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}
}

func TestBudgetAndOnDoneSuccessPathAllocations(t *testing.T) {
	ok := func() error { return nil }
	okCtx := func(context.Context) error { return nil }
	okValue := func(context.Context) (string, error) { return "done", nil }
	ctx := context.Background()
	b := benchBudget()
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

func BenchmarkOnErrorSuccessWithBudget(b *testing.B) {
	b.ReportAllocs()
	budget := benchBudget()
	fn := func() error { return nil }
	for b.Loop() {
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
	budget := benchBudget()
	fn := func() error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, fn, retry.WithBudget(budget)); err != nil {
				b.Error(err)
			}
		}
	})
}

func BenchmarkOnErrorSuccessWithOnDone(b *testing.B) {
	b.ReportAllocs()
	var done atomic.Int64
	onDone := func(retry.DoneEvent) { done.Add(1) }
	fn := func() error { return nil }
	calls := int64(0)
	for b.Loop() {
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
