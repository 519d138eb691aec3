package ctrlretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
)

// Requeue delays that Result gives: a Conflict's is uniform in
// (0, conflictRequeue], a budget refusal's uniform in
// [budgetRequeue, 2*budgetRequeue).
const (
	conflictRequeue = time.Second
	budgetRequeue   = time.Second
)

// Result maps the error of a reconcile's last write (a loop of this
// package or of github.com/kuberetry/retry) to what Reconcile returns, for
// `return ctrlretry.Result(err)`:
//
//   - nil gives (reconcile.Result{}, nil).
//   - An error matching context.Canceled or context.DeadlineExceeded is
//     returned as it is, with reconcile.Result{}: the reconcile was cut
//     short, and controller-runtime handles it.
//   - An error matching [retry.ErrBudgetExhausted] gives
//     (reconcile.Result{RequeueAfter: d}, nil) with d uniform in [1s, 2s):
//     the server has been failing, and the jitter spreads the requeues.
//   - A Conflict (apierrors.IsConflict) that is not an apply conflict gives
//     (reconcile.Result{RequeueAfter: d}, nil) with d uniform in (0, 1s]:
//     the requeue reads the object afresh, without the "Reconciler error"
//     log, the error metric and the rate limiter's growing backoff.
//   - An apply conflict ([retry.IsApplyConflict]) gives
//     [reconcile.TerminalError](err): the same apply can never succeed.
//   - Anything else is returned as it is, with reconcile.Result{}.
//
// Result is safe for concurrent use. Why each case maps as it does:
// https://github.com/kuberetry/retry/blob/main/docs/controller-runtime.md#a-reconciler.
func Result(err error) (reconcile.Result, error) {
	switch {
	case err == nil:
		return reconcile.Result{}, nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return reconcile.Result{}, err
	case errors.Is(err, retry.ErrBudgetExhausted):
		return reconcile.Result{RequeueAfter: budgetRequeue + rand.N(budgetRequeue)}, nil
	case retry.IsApplyConflict(err):
		return reconcile.Result{}, reconcile.TerminalError(err)
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: conflictRequeue - rand.N(conflictRequeue)}, nil
	}
	return reconcile.Result{}, err
}
