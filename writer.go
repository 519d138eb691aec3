package retry

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kuberetry/retry/internal/objrules"
)

// Object is what the write loops ([Update], [UpdateStatus], [Ensure],
// [Patch], and their closure forms [UpdateOnConflict], [CreateOrUpdate]
// and [PatchOnConflict]) read, change and write: a Kubernetes API object,
// such as *corev1.ConfigMap, *unstructured.Unstructured or a custom
// resource's pointer type. comparable lets the loops tell a nil pointer,
// the zero Object, from an object.
type Object interface {
	comparable
	runtime.Object
}

// Result tells what [Ensure] or [CreateOrUpdate] did.
type Result string

const (
	// ResultUnchanged: mutate changed nothing and no write was sent, or the
	// call failed.
	ResultUnchanged Result = "unchanged"
	// ResultCreated: the object did not exist and create wrote it.
	ResultCreated Result = "created"
	// ResultUpdated: the object existed and update wrote the change.
	ResultUpdated Result = "updated"
)

// writer is the write engine under every write loop: one loop's functions
// and state. create is nil but for CreateOrUpdate and Ensure, and patch
// nil but for PatchOnConflict and Patch, which write with it instead of
// update.
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

// newWriter returns the writer of a loop on current that reads with get
// and changes with mutate, its write left to the form to set. It is the
// one place that decides, for every write loop, whether the first attempt
// changes current without a read: only when current is a stored object
// (see isStored). Otherwise the first attempt reads with get, so a nil get
// is an error.
func newWriter[T Object](current T, get func(context.Context) (T, error), mutate func(T) error) (writer[T], error) {
	if mutate == nil {
		return writer[T]{}, errNilMutate
	}
	w := writer[T]{current: current, stored: isStored(current), get: get, mutate: mutate}
	if get == nil && !w.stored {
		return writer[T]{}, errNilGet
	}
	return w, nil
}

// isStored reports whether obj is a stored object: one that carries a
// resourceVersion (from an informer, a lister, a previous write), so that
// a write of a copy of it is refused with a Conflict when the object has
// changed since. Anything else (the zero T, an object the caller built, an
// object without object metadata, whose resourceVersion cannot be read)
// must be read first: written without a read it would overwrite whatever
// another writer stored.
func isStored[T Object](obj T) bool {
	var zero T
	if obj == zero {
		return false
	}
	acc, err := meta.Accessor(obj)
	return err == nil && acc.GetResourceVersion() != ""
}

// run runs the loop of w's attempts and returns what the last one left.
func (w *writer[T]) run(ctx context.Context, backoff Backoff, opts []Option) (T, Result, error) {
	if err := run(ctx, backoff, nil, attemptFunc{write: w.attempt}, nil, opts); err != nil {
		var zero T
		return zero, ResultUnchanged, err
	}
	return w.result, w.did, nil
}

// runNoResult is run for the loops that return no Result.
func (w *writer[T]) runNoResult(ctx context.Context, backoff Backoff, opts []Option) (T, error) {
	obj, _, err := w.run(ctx, backoff, opts)
	return obj, err
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
	updated, sent, err := w.write(ctx, before, obj)
	switch {
	case err != nil:
		return w.retriable(err, objrules.RetriableWrite(err, w.create != nil))
	case !sent: // a patch with nothing to send
		w.result, w.did = obj, ResultUnchanged
	default:
		w.result, w.did = updated, ResultUpdated
	}
	return false, nil
}

// write sends obj, changed from before: with update, or with patch as the
// merge patch from before to obj. It reports whether anything was sent: a
// patch is not when the JSON of both is the same.
func (w *writer[T]) write(ctx context.Context, before, obj T) (_ T, sent bool, _ error) {
	if w.patch == nil {
		updated, err := w.update(ctx, obj)
		return updated, true, err
	}
	var zero T
	data, err := mergePatch(before, obj)
	if err != nil || data == nil {
		return zero, false, err
	}
	patched, err := w.patch(ctx, obj, data)
	return patched, true, err
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
	objrules.ClearForCreate(acc)
	ns, name := acc.GetNamespace(), acc.GetName()
	if err := w.mutate(obj); err != nil {
		return false, err
	}
	if acc.GetNamespace() != ns || acc.GetName() != name {
		return false, renamed(ns, name, acc.GetNamespace(), acc.GetName())
	}
	created, err := w.create(ctx, obj)
	if err != nil {
		return w.retriable(err, objrules.RetriableCreate(err))
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
		namespacedName(oldNS, oldName), namespacedName(newNS, newName))
}

// namespacedName is namespace/name, or name for a cluster-scoped object.
func namespacedName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
