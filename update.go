package retry

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is what [UpdateOnConflict] reads, changes and writes: a Kubernetes
// API object, such as *corev1.ConfigMap or a custom resource's pointer
// type. comparable lets UpdateOnConflict tell a nil pointer, the zero
// Object, from an object.
type Object interface {
	comparable
	runtime.Object
}

var (
	errNilGet    = errors.New("retry: get is nil and current is the zero object, so there is nothing to change")
	errNilMutate = errors.New("retry: mutate is nil")
	errNilUpdate = errors.New("retry: update is nil")
	errGetNoObj  = errors.New("retry: get returned neither an object nor an error")
)

// UpdateOnConflict reads an object, changes it and writes it, and does it
// again on a 409 Conflict, the loop that every controller writes around an
// update. It returns the object as update returned it, or as get (or
// current) gave it when mutate changed nothing.
//
//  1. The first attempt works on a deep copy of current when current is not
//     the zero T (an object from an informer's lister or controller-runtime's
//     cached client), else on get(ctx). Every later attempt, after a
//     Conflict, calls get afresh, so no retry re-reads a stale cache.
//     current itself is never modified. With a nil get, a Conflict on the
//     first attempt is returned as it is, since nothing could re-read.
//  2. mutate(obj) changes obj in place. Its error ends the loop and is
//     returned as it is; nothing is written.
//  3. When mutate left obj semantically equal to a copy taken before it ran
//     (equality.Semantic.DeepEqual), obj is returned with a nil error and
//     update is not called: a no-op costs no write.
//  4. Otherwise update(ctx, obj) writes it: nil error returns update's
//     object, a Conflict is retried after the backoff's wait, any other
//     error is returned as it is. get's errors are returned as they are,
//     never retried, and so is a get that returns neither an object nor an
//     error.
//  5. When the attempts run out, the last Conflict itself is returned,
//     with the zero T.
//
// So a fresh current costs one request, the update; a stale one costs an
// update that fails with a Conflict, and one of the backoff's Steps. An
// informer's cache lags a writer's own last write: a caller that updates
// one object again and again passes the object its last update returned.
//
// Every rule of [OnErrorWithContext] holds: ctx is checked before every
// attempt and wait, a loop ended by ctx returns an error matching both
// ctx's error and the last Conflict, and options apply. An invalid backoff,
// a nil ctx, a nil mutate or update, or a nil get with a zero current
// returns an error at once and calls nothing.
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
	var zero T
	switch {
	case mutate == nil:
		return zero, errNilMutate
	case update == nil:
		return zero, errNilUpdate
	case get == nil && current == zero:
		return zero, errNilGet
	}
	u := updater[T]{current: current, get: get, mutate: mutate, update: update}
	if err := run(newLoopContext(ctx), backoff, u.retriable, attemptFunc{withCtx: u.attempt}, nil, opts); err != nil {
		return zero, err
	}
	return u.result, nil
}

// updater holds one UpdateOnConflict call's functions and state.
type updater[T Object] struct {
	current  T
	get      func(context.Context) (T, error)
	mutate   func(T) error
	update   func(context.Context, T) (T, error)
	attempts int
	conflict bool // the last attempt's error was update's Conflict
	result   T
}

// attempt is one read, change and write.
func (u *updater[T]) attempt(ctx context.Context) error {
	u.attempts++
	u.conflict = false
	obj, before, err := u.read(ctx)
	if err != nil {
		return err
	}
	if err := u.mutate(obj); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, obj) {
		u.result = obj
		return nil
	}
	updated, err := u.update(ctx, obj)
	if err != nil {
		u.conflict = apierrors.IsConflict(err)
		return err
	}
	u.result = updated
	return nil
}

// read returns the object to change, a copy of current on the first attempt
// when there is one, else get's object, and a copy of it to compare it with
// after mutate.
func (u *updater[T]) read(ctx context.Context) (obj, before T, err error) {
	var zero, original T
	if u.attempts == 1 && u.current != zero {
		original = u.current
		if obj, err = deepCopy(original); err != nil {
			return zero, zero, err
		}
	} else {
		obj, err = u.get(ctx)
		switch {
		case err != nil:
			return zero, zero, err
		case obj == zero:
			return zero, zero, errGetNoObj
		}
		original = obj
	}
	// A copy, not original itself: mutate may reach current through
	// another reference, which is wrong but must not hide a change.
	if before, err = deepCopy(original); err != nil {
		return zero, zero, err
	}
	return obj, before, nil
}

// deepCopy returns obj.DeepCopyObject() as a T, or an error naming both
// types when it is not one.
func deepCopy[T Object](obj T) (T, error) {
	copied := obj.DeepCopyObject()
	out, ok := copied.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("retry: DeepCopyObject of a %T returned a %T", obj, copied)
	}
	return out, nil
}

// retriable accepts update's Conflict, and only while there is a get to
// read the object afresh.
func (u *updater[T]) retriable(error) bool {
	return u.conflict && u.get != nil
}
