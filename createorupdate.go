package retry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
)

// CreateOrUpdate makes sure an object exists and looks as mutate wants it,
// the write of every reconciler, for any client: controller-runtime's
// controllerutil.CreateOrUpdate with its races retried (another writer's
// create, update or delete in between, and an HA control plane's quota
// admission refusing a create with a Conflict). get reads the object; on
// NotFound, create writes a copy of current, cleared of the fields a
// create must not carry and changed by mutate; otherwise update writes
// the changed copy. It returns the object as the server stored it (or the
// copy mutate was given, when nothing was written) and a [Result]; with an
// error, the zero T and [ResultUnchanged].
//
// It keeps the rules every write loop keeps, and those of create or
// update (what is cleared and kept, which errors are retried), in
// https://github.com/kuberetry/retry/blob/main/docs/writes.md#the-rules-every-write-loop-keeps.
// A zero current or one without object metadata, a nil get, mutate,
// create or update, an invalid backoff or a nil ctx returns an error at
// once, calling nothing. Every rule of [OnErrorWithContext] holds (ctx,
// options, Cap); it is safe for concurrent use. Every create in a
// namespace with a quota writes that quota, a hot object: in a busy
// namespace pass [HotObjectBackoff]. [Ensure] is its form for a client-go
// typed client.
func CreateOrUpdate[T Object](ctx context.Context, backoff Backoff, current T,
	get func(context.Context) (T, error), mutate func(T) error,
	create func(context.Context, T) (T, error),
	update func(context.Context, T) (T, error), opts ...Option) (T, Result, error) {
	var zero T
	switch {
	case current == zero:
		return zero, ResultUnchanged, errNilCurrent
	case get == nil:
		return zero, ResultUnchanged, errNilGetCreate
	case create == nil:
		return zero, ResultUnchanged, errNilCreate
	case update == nil:
		return zero, ResultUnchanged, errNilUpdate
	}
	if _, err := meta.Accessor(current); err != nil {
		return zero, ResultUnchanged, fmt.Errorf("retry: current, a %T, has no object metadata: %w", current, err)
	}
	w, err := newWriter(current, get, mutate)
	if err != nil {
		return zero, ResultUnchanged, err
	}
	w.create, w.update = create, update
	return w.run(ctx, backoff, opts)
}
