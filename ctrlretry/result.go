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
//     short (the manager is stopping), and controller-runtime handles it.
//   - An error matching [retry.ErrBudgetExhausted] gives
//     (reconcile.Result{RequeueAfter: d}, nil) with d uniform in [1s, 2s):
//     the retry budget refused a retry because the server has been failing,
//     which a quick requeue would not mend; the jitter spreads the
//     requeues of the objects refused together.
//   - A Conflict (apierrors.IsConflict) that is not an apply conflict gives
//     (reconcile.Result{RequeueAfter: d}, nil) with d uniform in (0, 1s]:
//     another writer won the object, and the requeue reads it afresh,
//     without the "Reconciler error" log and the error metric that
//     returning the Conflict costs, and without the rate limiter's growing
//     per-object backoff.
//   - An apply conflict ([retry.IsApplyConflict]) gives
//     [reconcile.TerminalError](err): the same apply can never succeed, so it
//     is logged and counted, and not requeued (a change of the object or of
//     what it watches triggers the next reconcile).
//   - Anything else is returned as it is, with reconcile.Result{}, for
//     controller-runtime to log and requeue with its rate limiter.
//
// Result is safe for concurrent use.
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
