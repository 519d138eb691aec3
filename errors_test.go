package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
)

func TestContextCauseWrapped(t *testing.T) {
	t.Parallel()
	shutdown := errors.New("controller shutting down")
	t.Run("canceled during a wait", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		s := conflicts(5)
		rec := fakeSleeper{hook: func(time.Duration) { cancel(shutdown) }}
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
