package ctrlretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

// loopError is the error a root loop returns when ctx ends it during a
// Conflict, or when a budget refuses the Conflict's retry.
func loopError(t *testing.T, ctx context.Context, budget *retry.Budget) error {
	t.Helper()
	opts := []retry.Option{retry.WithSleeper(testclock.NewFakeClock(time.Unix(0, 0)))}
	if budget != nil {
		opts = append(opts, retry.WithBudget(budget))
	}
	return retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, func(context.Context) error {
		return conflictOf("cm")
	}, opts...)
}

// TestResult maps each kind of error as its doc says.
func TestResult(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(testContext(t))
	cancel()
	ctxConflict := loopError(t, cancelled, nil)
	deadline := fmt.Errorf("list: %w", context.DeadlineExceeded)
	budgetConflict := loopError(t, testContext(t), &retry.Budget{Window: time.Second, Clock: testclock.NewFakeClock(time.Unix(0, 0))})
	if !errors.Is(ctxConflict, context.Canceled) || !errors.Is(budgetConflict, retry.ErrBudgetExhausted) || !apierrors.IsConflict(budgetConflict) {
		t.Fatalf("the loops returned %v and %v", ctxConflict, budgetConflict)
	}
	conflict := fmt.Errorf("update: %w", conflictOf("cm"))
	apply := applyConflict("cm")
	other := apierrors.NewInternalError(errors.New("etcd is down"))

	type want struct {
		requeueMin, requeueMax time.Duration // RequeueAfter in (min, max], or exactly 0 when both are 0
		err                    error         // the error returned, compared with errors.Is
		terminal               bool
	}
	cases := []struct {
		name string
		err  error
		want want
	}{
		{"nil", nil, want{}},
		{"ctx ended a loop during a Conflict", ctxConflict, want{err: ctxConflict}},
		{"a deadline", deadline, want{err: deadline}},
		{"a budget refusal after a Conflict", budgetConflict, want{requeueMin: 100*time.Millisecond - 1, requeueMax: 2 * time.Second}},
		{"a Conflict", conflict, want{requeueMax: time.Second}},
		{"an apply conflict", apply, want{err: apply, terminal: true}},
		{"a server error", other, want{err: other}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for range 100 {
				res, err := ctrlretry.Result(c.err)
				// Nothing but RequeueAfter: Requeue (deprecated since
				// controller-runtime v0.21) stays false.
				if res != (reconcile.Result{RequeueAfter: res.RequeueAfter}) {
					t.Fatalf("Requeue set: %+v", res)
				}
				if c.want.requeueMax == 0 && res.RequeueAfter != 0 || c.want.requeueMax > 0 && (res.RequeueAfter <= c.want.requeueMin || res.RequeueAfter > c.want.requeueMax) {
					t.Fatalf("RequeueAfter %v, want in (%v, %v]", res.RequeueAfter, c.want.requeueMin, c.want.requeueMax)
				}
				switch {
				case c.want.err == nil && err != nil:
					t.Fatalf("returned error %v, want nil", err)
				case c.want.err != nil && (!errors.Is(err, c.want.err) || err.Error() != c.want.err.Error() && !c.want.terminal):
					t.Fatalf("returned error %v, want %v", err, c.want.err)
				case errors.Is(err, reconcile.TerminalError(nil)) != c.want.terminal:
					t.Fatalf("returned %v: terminal %v, want %v", err, !c.want.terminal, c.want.terminal)
				}
			}
		})
	}
}

// TestResultRequeueSpread: a Conflict's requeue is uniform in (0, 1s], a
// budget refusal's at least 100ms: over 2000 draws, every tenth of the
// range is hit (each misses with probability 0.9^2000).
func TestResultRequeueSpread(t *testing.T) {
	t.Parallel()
	budgetErr := loopError(t, testContext(t), &retry.Budget{Window: time.Second, Clock: testclock.NewFakeClock(time.Unix(0, 0))})
	for _, c := range []struct {
		name     string
		err      error
		min, max time.Duration
	}{
		{"Conflict", conflictOf("cm"), 0, time.Second},
		{"budget", budgetErr, time.Second, 2 * time.Second},
	} {
		var deciles [10]int
		for range 2000 {
			res, _ := ctrlretry.Result(c.err)
			d := res.RequeueAfter
			if d < 100*time.Millisecond && c.name == "budget" || d <= 0 || d > c.max {
				t.Fatalf("%s: RequeueAfter %v", c.name, d)
			}
			deciles[min(9, int(10*(d-c.min)/(c.max-c.min)))]++
		}
		for i, n := range deciles {
			if n == 0 {
				t.Errorf("%s: no RequeueAfter in tenth %d of (%v, %v]: %v", c.name, i, c.min, c.max, deciles)
			}
		}
	}
}
