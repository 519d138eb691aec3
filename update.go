package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is what [UpdateOnConflict] and [CreateOrUpdate] read, change and
// write: a Kubernetes API object, such as *corev1.ConfigMap,
// *unstructured.Unstructured or a custom resource's pointer type.
// comparable lets the loops tell a nil pointer, the zero Object, from an
// object.
type Object interface {
	comparable
	runtime.Object
}

// Result tells what [CreateOrUpdate] did.
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

var (
	errNilGet       = errors.New("retry: get is nil and current is the zero object, so there is nothing to change")
	errNilGetCreate = errors.New("retry: get is nil")
	errNilMutate    = errors.New("retry: mutate is nil")
	errNilCreate    = errors.New("retry: create is nil")
	errNilUpdate    = errors.New("retry: update is nil")
	errNilCurrent   = errors.New("retry: current is the zero object; it must name the object to create or update")
	errGetNoObj     = errors.New("retry: get returned neither an object nor an error")
)

// IsApplyConflict reports whether err is a Server-Side Apply conflict: the
// API error that apierrors.IsConflict finds (the first APIStatus in err's
// tree, through wrapping and errors.Join) has reason Conflict and a cause
// of type FieldManagerConflict, because the apply set a field that another
// field manager owns. Sending the same apply again can never succeed, so
// [RetryOnConflict], [RetryOnConflictWithContext], [UpdateOnConflict] and
// [CreateOrUpdate] return it at once instead of retrying it; the caller
// either drops the field from its apply or forces the apply
// (metav1.PatchOptions.Force). [IsTransient] is false for it too.
func IsApplyConflict(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Reason != metav1.StatusReasonConflict || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// isRetriableConflict is the predicate of the conflict loops: a Conflict
// that another attempt, reading the object afresh, may not meet.
func isRetriableConflict(err error) bool {
	return apierrors.IsConflict(err) && !IsApplyConflict(err)
}

// UpdateOnConflict reads an object, changes it and writes it, and does it
// again on a 409 Conflict, the loop that every controller writes around an
// update. It returns the object as update returned it, or, when mutate
// changed nothing, the copy mutate was given.
//
//  1. The first attempt works on a deep copy of current when current is not
//     the zero T (an object from an informer's lister or controller-runtime's
//     cached client), else on a deep copy of get(ctx)'s object. Every later
//     attempt, after a Conflict, calls get afresh, so no retry re-reads a
//     stale cache. Neither current nor any object get returns is ever
//     modified, so a get that reads a shared cache cannot corrupt it. With a
//     nil get, a Conflict on the first attempt is returned as it is, since
//     nothing could re-read.
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
//     differs from an empty one. In short, no write when the content
//     encodes to the same JSON.
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
	w := writer[T]{current: current, stored: current != zero, get: get, mutate: mutate, update: update}
	if err := run(newLoopContext(ctx), backoff, w.retriable, attemptFunc{withCtx: w.attempt}, nil, opts); err != nil {
		return zero, err
	}
	return w.result, nil
}

// CreateOrUpdate makes sure an object exists and looks as mutate wants it,
// the write of every reconciler, with the races that controller-runtime's
// controllerutil.CreateOrUpdate returns to its caller retried: another
// writer's create (AlreadyExists), update (Conflict) or delete (NotFound)
// in between. It returns the object as the server stored it (create's or
// update's), or, when mutate changed nothing, the copy mutate was given, and
// what it did.
//
//  1. current names the object. When it has a resourceVersion it is a
//     stored object (from an informer's lister or controller-runtime's
//     cached client): the first attempt works on a deep copy of it without
//     calling get, as [UpdateOnConflict] does. Otherwise it is an object
//     the caller built, with its name (and namespace, for a namespaced
//     kind) set, and the first attempt calls get. Every later attempt calls
//     get. Neither current nor any object get returns is ever modified.
//  2. When get returns NotFound, the attempt creates: a deep copy of current,
//     with the fields that a create must not carry cleared
//     (resourceVersion, uid, creationTimestamp, deletionTimestamp,
//     deletionGracePeriodSeconds, selfLink, generation and managedFields;
//     see below),
//     is changed by mutate and written by create, with no no-op check.
//     Success returns (create's object, [ResultCreated], nil). AlreadyExists,
//     another writer having created it meanwhile, is retried, and the next
//     attempt's get finds it. Any other error of create (a namespace that
//     does not exist, say) is returned as it is.
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
// What the create path clears, as the real apiserver (v1.37) showed: it
// refuses a create that carries a resourceVersion (with a 500, which
// [IsTransient] cannot tell from a server fault); it replaces uid,
// creationTimestamp, selfLink and a deletion timestamp with its own, and
// resets generation for the kinds that track it, but keeps the one sent for
// others (a ConfigMap). It keeps the managedFields a create sends for every
// field the new object does not carry, so a stale copy would credit such
// fields to managers that never wrote the new object, and a later apply of
// them would conflict with those managers. ownerReferences, finalizers,
// labels and annotations are kept: they are what the caller wants the
// object to carry (a copy cached while the object was being deleted brings
// its finalizers back; mutate sets the ones it wants). The server drops a
// status sent with a create: a status change needs a status write after
// it.
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
	case mutate == nil:
		return zero, ResultUnchanged, errNilMutate
	case create == nil:
		return zero, ResultUnchanged, errNilCreate
	case update == nil:
		return zero, ResultUnchanged, errNilUpdate
	}
	acc, err := meta.Accessor(current)
	if err != nil {
		return zero, ResultUnchanged, fmt.Errorf("retry: current, a %T, has no object metadata: %w", current, err)
	}
	w := writer[T]{current: current, stored: acc.GetResourceVersion() != "",
		get: get, mutate: mutate, create: create, update: update}
	if err := run(newLoopContext(ctx), backoff, w.retriable, attemptFunc{withCtx: w.attempt}, nil, opts); err != nil {
		return zero, ResultUnchanged, err
	}
	return w.result, w.did, nil
}

// writer holds one UpdateOnConflict or CreateOrUpdate call's functions and
// state; create is nil for UpdateOnConflict.
type writer[T Object] struct {
	current  T
	stored   bool // the first attempt works on a copy of current, without get
	get      func(context.Context) (T, error)
	mutate   func(T) error
	create   func(context.Context, T) (T, error)
	update   func(context.Context, T) (T, error)
	attempts int
	retry    bool // the last attempt's error may pass on another attempt
	result   T
	did      Result
}

// attempt is one read, change and write.
func (w *writer[T]) attempt(ctx context.Context) error {
	w.attempts++
	w.retry = false
	var zero T
	original := w.current
	if w.attempts > 1 || !w.stored {
		got, err := w.get(ctx)
		switch {
		case err != nil && w.create != nil && apierrors.IsNotFound(err):
			return w.createFromCurrent(ctx)
		case err != nil:
			return err
		case got == zero:
			return errGetNoObj
		}
		original = got
	}
	// Two copies: one for mutate, one to compare with afterwards. Comparing
	// with original itself would miss a change that mutate made to it
	// through another reference (a lister's), which is wrong but must not
	// hide a change.
	obj, err := deepCopy(original)
	if err != nil {
		return err
	}
	before, err := deepCopy(original)
	if err != nil {
		return err
	}
	if err := w.mutate(obj); err != nil {
		return err
	}
	if err := keptKey(before, obj); err != nil {
		return err
	}
	if equal(before, obj) {
		w.result, w.did = obj, ResultUnchanged
		return nil
	}
	updated, err := w.update(ctx, obj)
	if err != nil {
		w.retry = isRetriableConflict(err) || w.create != nil && apierrors.IsNotFound(err)
		return err
	}
	w.result, w.did = updated, ResultUpdated
	return nil
}

// createFromCurrent is the create path of CreateOrUpdate: a copy of current
// without the fields a create must not carry, changed by mutate.
func (w *writer[T]) createFromCurrent(ctx context.Context) error {
	obj, err := deepCopy(w.current)
	if err != nil {
		return err
	}
	acc, err := meta.Accessor(obj)
	if err != nil { // a DeepCopyObject that lost the metadata current had
		return fmt.Errorf("retry: the copy of current, a %T, has no object metadata: %w", obj, err)
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
		return err
	}
	if acc.GetNamespace() != ns || acc.GetName() != name {
		return renamed(ns, name, acc.GetNamespace(), acc.GetName())
	}
	created, err := w.create(ctx, obj)
	if err != nil {
		w.retry = apierrors.IsAlreadyExists(err)
		return err
	}
	w.result, w.did = created, ResultCreated
	return nil
}

// retriable accepts the error the last attempt marked as retriable, and
// only while there is a get to read the object afresh.
func (w *writer[T]) retriable(error) bool {
	return w.retry && w.get != nil
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

// equal is the no-op check: equality.Semantic.DeepEqual, or, for
// unstructured content, a comparison of the JSON values in which numbers
// are equal when their values are.
func equal(before, obj runtime.Object) bool {
	b, ok := before.(runtime.Unstructured)
	if !ok {
		return equality.Semantic.DeepEqual(before, obj)
	}
	o, ok := obj.(runtime.Unstructured)
	if !ok {
		return false
	}
	return equalJSON(b.UnstructuredContent(), o.UnstructuredContent())
}

// equalJSON compares two values of unstructured content at any depth, as
// the JSON they encode to: numbers are equal when their values are, and a
// nil map or slice is null, which differs from an empty one (for a
// custom resource the server may keep either). Values of types JSON has
// not are left to equality.Semantic.
func equalJSON(a, b any) bool {
	if isNull(a) || isNull(b) {
		return isNull(a) && isNull(b)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		return ok && x.equal(y)
	}
	return equality.Semantic.DeepEqual(a, b)
}

// isNull reports whether v encodes to JSON null.
func isNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return x == nil
	case []any:
		return x == nil
	}
	return false
}

// number is a Go numeric value as one of int64, uint64 or float64, so that
// values of different types compare exactly.
type number struct {
	kind numberKind
	i    int64
	u    uint64
	f    float64
}

type numberKind uint8

// The kinds in the order number.equal sorts a pair by.
const (
	float numberKind = iota
	signed
	unsigned
)

func toNumber(v any) (number, bool) {
	switch n := v.(type) {
	case int:
		return number{kind: signed, i: int64(n)}, true
	case int8:
		return number{kind: signed, i: int64(n)}, true
	case int16:
		return number{kind: signed, i: int64(n)}, true
	case int32:
		return number{kind: signed, i: int64(n)}, true
	case int64:
		return number{kind: signed, i: n}, true
	case uint:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint8:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint16:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint32:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint64:
		return number{kind: unsigned, u: n}, true
	case float32:
		return number{kind: float, f: float64(n)}, true
	case float64:
		return number{kind: float, f: n}, true
	case json.Number: // what a decoder set to UseNumber gives
		if i, err := n.Int64(); err == nil {
			return number{kind: signed, i: i}, true
		}
		if f, err := n.Float64(); err == nil {
			return number{kind: float, f: f}, true
		}
	}
	return number{}, false
}

// equal reports whether x and y are the same number, exactly: no float
// rounding makes two different integers equal.
func (x number) equal(y number) bool {
	if x.kind > y.kind {
		x, y = y, x
	}
	switch {
	case x.kind == y.kind:
		return x.i == y.i && x.u == y.u && x.f == y.f
	case x.kind == signed: // y is unsigned
		return x.i >= 0 && uint64(x.i) == y.u
	case y.kind == signed: // x is a float
		const two63 = 1 << 63
		return x.f >= -two63 && x.f < two63 && x.f == math.Trunc(x.f) && int64(x.f) == y.i
	default: // x is a float, y a uint
		const two64 = 1 << 64
		return x.f >= 0 && x.f < two64 && x.f == math.Trunc(x.f) && uint64(x.f) == y.u
	}
}
