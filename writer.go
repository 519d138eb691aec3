package retry

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// writer holds one write loop's functions and state: create is nil but
// for CreateOrUpdate and Ensure, and patch nil but for PatchOnConflict and
// Patch, which write with it instead of update.
type writer[T Object] struct {
	current  T
	stored   bool // the first attempt works on a copy of current, without get
	get      func(context.Context) (T, error)
	mutate   func(T) error
	create   func(context.Context, T) (T, error)
	update   func(context.Context, T) (T, error)
	patch    func(context.Context, T, []byte) (T, error)
	attempts int
	result   T
	did      Result
}

// run runs the loop of w's attempts and returns what the last one left.
func (w *writer[T]) run(ctx context.Context, backoff Backoff, opts []Option) (T, Result, error) {
	if err := run(ctx, backoff, nil, attemptFunc{write: w.attempt}, nil, opts); err != nil {
		var zero T
		return zero, ResultUnchanged, err
	}
	return w.result, w.did, nil
}

// attempt is one read, change and write. It reports whether its error may
// pass on another attempt: only a write's error may (see retriable), never
// one of get or mutate.
func (w *writer[T]) attempt(ctx context.Context) (retry bool, err error) {
	w.attempts++
	var zero T
	original := w.current
	// Without get (UpdateOnConflict's nil get) only an attempt that ran out
	// of its own time is retried, on current again.
	if !w.stored || w.attempts > 1 && w.get != nil {
		got, err := w.get(ctx)
		switch {
		case err != nil && w.create != nil && apierrors.IsNotFound(err):
			return w.createFromCurrent(ctx)
		case err != nil:
			return false, err
		case got == zero:
			return false, errGetNoObj
		}
		original = got
	}
	// Two copies: one for mutate, one to compare with afterwards. Comparing
	// with original itself would miss a change that mutate made to it
	// through another reference (a lister's), which is wrong but must not
	// hide a change.
	obj, err := deepCopy(original)
	if err != nil {
		return false, err
	}
	before, err := deepCopy(original)
	if err != nil {
		return false, err
	}
	if err := w.mutate(obj); err != nil {
		return false, err
	}
	if err := keptKey(before, obj); err != nil {
		return false, err
	}
	if equal(before, obj) {
		w.result, w.did = obj, ResultUnchanged
		return false, nil
	}
	var updated T
	if w.patch != nil {
		var sent bool
		if updated, sent, err = w.sendPatch(ctx, before, obj); err == nil && !sent {
			w.result, w.did = obj, ResultUnchanged
			return false, nil
		}
	} else {
		updated, err = w.update(ctx, obj)
	}
	if err != nil {
		// A NotFound: deleted meanwhile, which only CreateOrUpdate mends.
		return w.retriable(err, isRetriableConflict(err) || w.create != nil && apierrors.IsNotFound(err))
	}
	w.result, w.did = updated, ResultUpdated
	return false, nil
}

// createFromCurrent is the create path of CreateOrUpdate: a copy of current
// without the fields a create must not carry, changed by mutate.
func (w *writer[T]) createFromCurrent(ctx context.Context) (retry bool, err error) {
	obj, err := deepCopy(w.current)
	if err != nil {
		return false, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil { // a DeepCopyObject that lost the metadata current had
		return false, fmt.Errorf("retry: the copy of current, a %T, has no object metadata: %w", obj, err)
	}
	acc.SetResourceVersion("")
	acc.SetUID("")
	acc.SetCreationTimestamp(metav1.Time{})
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetSelfLink("")
	acc.SetGeneration(0)
	acc.SetManagedFields(nil)
	ns, name := acc.GetNamespace(), acc.GetName()
	if err := w.mutate(obj); err != nil {
		return false, err
	}
	if acc.GetNamespace() != ns || acc.GetName() != name {
		return false, renamed(ns, name, acc.GetNamespace(), acc.GetName())
	}
	created, err := w.create(ctx, obj)
	if err != nil {
		// A create carries no resourceVersion, so its Conflict is never the
		// object's own: a quota admission's race on an HA control plane.
		return w.retriable(err, apierrors.IsAlreadyExists(err) || isRetriableConflict(err))
	}
	w.result, w.did = created, ResultCreated
	return false, nil
}

// retriable is the verdict on a write's error err that another attempt,
// reading the object afresh, may mend (ok): it may pass only while there is
// a get to read with.
func (w *writer[T]) retriable(err error, ok bool) (retry bool, _ error) {
	return ok && w.get != nil, err
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

// keptKey returns an error when mutate moved obj to another name or
// namespace than before's; objects without object metadata pass.
func keptKey(before, obj runtime.Object) error {
	old, err := meta.Accessor(before)
	if err != nil {
		return nil
	}
	now, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	if old.GetNamespace() != now.GetNamespace() || old.GetName() != now.GetName() {
		return renamed(old.GetNamespace(), old.GetName(), now.GetNamespace(), now.GetName())
	}
	return nil
}

func renamed(oldNS, oldName, newNS, newName string) error {
	return fmt.Errorf("retry: mutate changed the object's key from %q to %q; it must not change the name or namespace",
		key(oldNS, oldName), key(newNS, newName))
}

// key is namespace/name, or name for a cluster-scoped object.
func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
