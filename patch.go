package retry

import "context"

// PatchOnConflict reads an object, changes it and sends what changed as a
// JSON merge patch (RFC 7386) locked to the version read, and does it again
// on a 409 Conflict. It is [UpdateOnConflict] with a patch for the write:
// when mutate changed the object, patch(ctx, obj, data) is called with obj
// the changed copy and data the merge patch from the object read to obj,
// and it returns patch's object. The patch carries only what mutate
// changed, so a field the client's Go type does not know is kept (except
// inside a list that mutate changed, which is sent whole).
//
// Every rule of UpdateOnConflict holds, and those of the merge patch (the
// lock, what is sent, when nothing is), in
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#merge-patch.
// A nil patch, a nil mutate, or a nil get with a current that carries no
// resourceVersion returns an error at once and calls nothing. [Patch] is
// its form for a client-go typed client.
func PatchOnConflict[T Object](ctx context.Context, backoff Backoff, current T,
	get func(context.Context) (T, error), mutate func(T) error,
	patch func(ctx context.Context, obj T, data []byte) (T, error), opts ...Option) (T, error) {
	if patch == nil {
		var zero T
		return zero, errNilPatch
	}
	w, err := newWriter(current, get, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	w.patch = patch
	return w.runNoResult(ctx, backoff, opts)
}
