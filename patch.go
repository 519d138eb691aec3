package retry

import "context"

// PatchOnConflict reads an object, changes it and sends what changed as a
// JSON merge patch (RFC 7386) locked to the version read, and does it again
// on a 409 Conflict. It is [UpdateOnConflict] with a patch for the write,
// and every rule of that loop holds (the first attempt on a copy of
// current only when it carries a resourceVersion, else on what get read;
// get afresh after a Conflict, mutate's
// error returned, the no-op check, a renaming mutate refused, options,
// exhaustion, bad input), except the write itself:
//
// When mutate changed the object, patch(ctx, obj, data) is called with obj
// the changed copy and data a merge patch from the object as read (before
// mutate) to obj, which also sets metadata.resourceVersion to the version
// read. The server applies it only to that version and answers a 409
// Conflict otherwise, which is retried with a fresh read, so the patch is
// as safe as an update. It returns patch's object.
//
// The patch carries only what mutate changed: a field mutate removed is a
// null, a list mutate changed is sent whole (a merge patch cannot change
// part of a list), and every other field is left out. So a field that this
// client's Go type does not know (one a newer server added, or an older
// client never had) is kept, where an update of the decoded object would
// drop it; except inside a list that mutate changed. Applying data to the
// object as read gives obj, as the server decodes it: a null member of a
// JSON object counts as absent. A change of metadata.resourceVersion by
// mutate is not sent (the lock is the version read), and an object read
// without a resourceVersion (one without object metadata) gets a patch
// without a lock. When the JSON of obj is that of the object read (mutate
// changed only what JSON does not carry), nothing is sent, as when mutate
// changed nothing.
//
// Both objects are encoded with encoding/json, as client-go's typed
// clients and *unstructured.Unstructured encode them. A nil patch, a nil
// mutate, or a nil get with a current that carries no resourceVersion
// returns an error at once and calls nothing. [Patch] is its form for a
// client-go typed client.
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
