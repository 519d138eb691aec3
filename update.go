package retry

import "context"

// UpdateOnConflict reads an object, changes it and writes it, and does it
// again on a 409 Conflict: the update of every controller, for any client.
// get reads the object from the server, mutate changes the copy it is
// given, update writes it. It returns update's object or, when mutate
// changed nothing, the copy mutate was given, with no write sent.
//
// It keeps the rules every write loop keeps (which attempt reads, the
// no-op check, what mutate must not do, what is retried and returned), in
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#the-rules-every-write-loop-keeps.
// Its own: get may be nil when current carries a resourceVersion, and a
// Conflict on the first attempt is then returned as it is. A nil ctx,
// mutate or update, an invalid backoff, or a nil get with a current that
// is not a stored object returns an error at once and calls nothing.
// Every rule of [OnErrorWithContext] holds (ctx, options, Cap); it is safe
// for concurrent use. [Update] is its form for a client-go typed client.
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
