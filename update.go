package retry

import "context"

// UpdateOnConflict reads an object, changes it and writes it, and does it
// again on a 409 Conflict, the loop that every controller writes around an
// update. It returns the object as update returned it, or, when mutate
// changed nothing, the copy mutate was given.
//
//  1. The first attempt works on a deep copy of current without a read
//     only when current is a stored object, one that carries a
//     resourceVersion (from an informer's lister, controller-runtime's
//     cached client or a previous write). Any other current (the zero T,
//     an object the caller built with its name and no resourceVersion, or
//     one without object metadata, whose resourceVersion cannot be read)
//     makes the first attempt call get and work on a deep copy of what it
//     read, so no write goes without the resourceVersion it was read at.
//     Every later attempt, after a Conflict, calls get afresh, so no retry
//     re-reads a stale cache. Neither current nor any object get returns
//     is ever modified, so a get that reads a shared cache cannot corrupt
//     it. With a nil get, a Conflict on the first attempt is returned as
//     it is, since nothing could re-read (an attempt that ran out of its
//     own [WithAttemptTimeout] is retried, on a copy of current again).
//  2. mutate(obj) changes the copy in place. Its error ends the loop and is
//     returned as it is; nothing is written. A mutate that changes the
//     object's name or namespace ends the loop with an error naming both
//     keys, and nothing is written (an object without object metadata is
//     not checked).
//  3. When mutate left the copy equal to the object read, update is not
//     called and the copy is returned with a nil error: a no-op costs no
//     write. Equal is equality.Semantic.DeepEqual (a Quantity of "1" equals
//     one of "1000m"); for an object whose content is unstructured
//     (runtime.Unstructured, such as *unstructured.Unstructured) numbers of
//     any Go type are equal when their values are, so the int64 that a
//     stored field decodes as and the float64 of the same value from YAML
//     or JSON are no change; a nil map or slice is JSON's null, which
//     differs from an empty one, so for unstructured content no write is
//     sent exactly when the content encodes to the same JSON. For a typed
//     object Semantic.DeepEqual counts a nil map or slice equal to an empty
//     one, so mutate turning one into the other sends no write either.
//  4. Otherwise update(ctx, obj) writes it: nil error returns update's
//     object, a Conflict is retried after the backoff's wait, any other
//     error is returned as it is, and so is an apply conflict
//     ([IsApplyConflict]). get's errors are returned as they are, never
//     retried, and so is a get that returns neither an object nor an
//     error.
//  5. When the attempts run out, the last Conflict itself is returned,
//     with the zero T.
//
// So a fresh current costs one request, the update; a stale one costs an
// update that fails with a Conflict, and one of the backoff's Steps. An
// informer's cache lags a writer's own last write: a caller that updates
// one object again and again passes the object its last update returned.
//
// mutate must set the state it wants without reading the clock: a
// metav1.Now() written on every call (a condition's lastTransitionTime)
// always differs, so no write is ever skipped. Set a timestamp only when
// the state it dates changes.
//
// Every rule of [OnErrorWithContext] holds: ctx is checked before every
// attempt and wait, a loop ended by ctx returns an error matching both
// ctx's error and the last Conflict, and options apply. An invalid backoff,
// a nil ctx, a nil mutate or update, or a nil get with a current that is
// not a stored object returns an error at once and calls nothing.
//
// Each write carries the resourceVersion its object was read at, so it
// never overwrites a change made since. But after a Conflict, mutate runs
// again on the object read afresh: when a transport error has left a write's
// outcome unknown and the caller retries, mutate must set the state it
// wants (add a key, set a field) rather than build on what it finds (an
// increment would apply twice). Then a retry finds its change already made
// and writes nothing.
func UpdateOnConflict[T Object](ctx context.Context, backoff Backoff, current T,
	get func(context.Context) (T, error), mutate func(T) error,
	update func(context.Context, T) (T, error), opts ...Option) (T, error) {
	if update == nil {
		var zero T
		return zero, errNilUpdate
	}
	w, err := newWriter(current, get, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	w.update = update
	return w.runNoResult(ctx, backoff, opts)
}
