package retry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
)

// CreateOrUpdate makes sure an object exists and looks as mutate wants it,
// the write of every reconciler, with the races that controller-runtime's
// controllerutil.CreateOrUpdate returns to its caller retried: another
// writer's create (AlreadyExists), update (Conflict) or delete (NotFound)
// in between, and the Conflict of a create that an HA control plane's
// quota admission refused. It returns the object as the server stored it
// (create's or update's), or, when mutate changed nothing, the copy mutate
// was given, and what it did.
//
//  1. current names the object. When it has a resourceVersion it is a
//     stored object (from an informer's lister, controller-runtime's
//     cached client or a previous write): the first attempt works on a
//     deep copy of it without calling get, by the one rule of every write
//     loop ([UpdateOnConflict]'s rule 1). Otherwise it is an object
//     the caller built, with its name (and namespace, for a namespaced
//     kind) set, and the first attempt calls get. Every later attempt calls
//     get. Neither current nor any object get returns is ever modified.
//  2. When get returns NotFound, the attempt creates: a deep copy of current,
//     with the fields that a create must not carry cleared
//     (resourceVersion, uid, creationTimestamp, deletionTimestamp,
//     deletionGracePeriodSeconds, selfLink, generation and managedFields;
//     see below), is changed by mutate and written by create, with no
//     no-op check. Success returns (create's object, [ResultCreated],
//     nil). AlreadyExists, another writer having created it meanwhile, is
//     retried, and the next attempt's get finds it. So is a Conflict: a
//     create carries no resourceVersion, so its Conflict is never the
//     object's own, but on an HA control plane (several kube-apiservers on
//     one etcd) the ResourceQuota admission of each updates the
//     namespace's quota, and a create that loses that race is refused with
//     a Conflict on the resourcequotas (kubernetes/kubernetes#67761). The
//     next attempt calls get. Every create in the namespace writes that
//     quota, a hot object: in a busy namespace give the loop
//     [HotObjectBackoff]. Any other
//     error of create (a namespace that does not exist, say) is returned
//     as it is.
//  3. When get returns the object, the attempt updates it by the rules 2-4
//     of [UpdateOnConflict]: no change returns (the copy, [ResultUnchanged],
//     nil) and sends nothing; a write returns (update's object,
//     [ResultUpdated], nil). A Conflict is retried, and so is a NotFound
//     from update (deleted meanwhile: the next attempt creates it). An
//     apply conflict ([IsApplyConflict]) is not.
//  4. Any other error of get, mutate, create or update is returned as it
//     is, never retried. With any error the result is (zero T,
//     [ResultUnchanged], err). When the attempts run out, err is the last
//     retriable error itself: a Conflict, an AlreadyExists or a NotFound.
//  5. A zero current, or one whose metadata meta.Accessor cannot read, a
//     nil get, mutate, create or update, an invalid backoff or a nil ctx
//     returns an error at once, calling nothing. A mutate that changes the
//     name or namespace ends the loop with an error naming both keys,
//     writing nothing.
//
// Every rule of [OnErrorWithContext] holds (ctx, options, Cap).
//
// A stored current that mutate leaves unchanged costs no request at all,
// so a deletion on the server that the cache has not seen yet goes
// unnoticed until it has (as with controller-runtime's cached Get); the
// informer's delete event then triggers the next reconcile, which creates
// the object.
//
// The create path keeps ownerReferences, finalizers, labels and
// annotations: they are what the caller wants the object to carry (a copy
// cached while the object was being deleted brings its finalizers back;
// mutate sets the ones it wants). The server drops a status sent with a
// create: a status change needs a status write after it. Why each cleared
// field is cleared, as a real apiserver answers, is in the repository's
// docs/writes.md ("Every write").
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
