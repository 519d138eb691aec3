// Package ctrlretry is controller-runtime's controllerutil.CreateOrUpdate
// and controllerutil.CreateOrPatch with the races retried, and [Result],
// which turns a reconciler's error into the reconcile result that
// controller authors want.
//
// Moving from controllerutil is one import: [CreateOrUpdate] and
// [CreateOrPatch] take the same arguments (a nil MutateFn included) and,
// where nothing races, send the same requests and return the same
// OperationResult and errors, since each attempt is a call of
// controllerutil's own function. What controllerutil returns to its caller
// when another writer got in between is retried instead: AlreadyExists or a
// Conflict from Create, a Conflict from Update or Patch, NotFound from
// Update or Patch. A retry starts again from a copy of obj as the caller
// passed it and reads the object afresh, through [WithReader]'s reader when
// one is given; a re-read that a lagging cache answers with the version
// that just failed is not written, it waits for the next step.
//
// The loop is github.com/kuberetry/retry's: [WithBackoff] sets its
// [retry.Backoff] (default [retry.DefaultRetry]) and [WithLoopOptions]
// passes any of its options (a fake clock, a retry budget, hooks).
package ctrlretry
