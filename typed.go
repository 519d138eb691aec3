package retry

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UpdateClient is what [Update] takes: the Get and Update methods of a
// client-go typed client (corev1client.ConfigMapInterface,
// appsv1client.DeploymentInterface, ...), already namespaced for a
// namespaced kind.
type UpdateClient[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// UpdateStatusClient is what [UpdateStatus] takes: the Get and
// UpdateStatus methods of the client-go typed client of a kind with a
// status subresource (appsv1client.DeploymentInterface, ...).
type UpdateStatusClient[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// EnsureClient is what [Ensure] takes: the Get, Create and Update methods
// of a client-go typed client.
type EnsureClient[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// PatchClient is what [Patch] takes: the Get and Patch methods of a
// client-go typed client.
type PatchClient[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// getter is the Get method every typed form's client has.
type getter[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// Update is [UpdateOnConflict] through a client-go typed client: it reads
// the object named by obj with c.Get, changes a copy with mutate and writes
// it with c.Update, again after a Conflict, and returns the object as the
// server stored it (or, when mutate changed nothing, the copy mutate was
// given). Every rule of UpdateOnConflict holds, obj in current's place: an
// obj with a resourceVersion is changed without a read, so a fresh one
// costs one request; one without is read first
// (https://github.com/kuberetry/retry/blob/main/docs/writes.md#one-rule-for-a-stored-object).
//
// Unlike current, obj is required: it names the object. obj is never
// modified. Each c.Get and c.Update is given the attempt's context and
// empty options. c is namespaced already (cms :=
// client.CoreV1().ConfigMaps(ns)); obj's namespace is not passed to it. A
// nil c, a zero obj or one without a name (or without object metadata),
// a nil mutate, an invalid backoff or a nil ctx returns an error at once,
// calling nothing.
func Update[T Object](ctx context.Context, backoff Backoff, c UpdateClient[T], obj T,
	mutate func(T) error, opts ...Option) (T, error) {
	w, err := typedWriter[T](c, obj, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	w.update = func(ctx context.Context, o T) (T, error) { return c.Update(ctx, o, metav1.UpdateOptions{}) }
	return w.runNoResult(ctx, backoff, opts)
}

// UpdateStatus is [Update] writing with c.UpdateStatus: the server keeps
// only the status of what it is sent, and the object's other fields as
// they are stored. Every rule of Update holds.
func UpdateStatus[T Object](ctx context.Context, backoff Backoff, c UpdateStatusClient[T], obj T,
	mutate func(T) error, opts ...Option) (T, error) {
	w, err := typedWriter[T](c, obj, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	w.update = func(ctx context.Context, o T) (T, error) { return c.UpdateStatus(ctx, o, metav1.UpdateOptions{}) }
	return w.runNoResult(ctx, backoff, opts)
}

// Ensure is [CreateOrUpdate] through a client-go typed client: it makes
// sure the object named by obj exists and looks as mutate wants it,
// reading with c.Get, creating with c.Create and updating with c.Update,
// with the races between them retried. Every rule of CreateOrUpdate holds,
// obj in current's place (a copy of obj seeds the object created). obj is
// never modified. A nil c, a zero obj or one without a name, a nil mutate,
// an invalid backoff or a nil ctx returns an error at once, calling
// nothing.
func Ensure[T Object](ctx context.Context, backoff Backoff, c EnsureClient[T], obj T,
	mutate func(T) error, opts ...Option) (T, Result, error) {
	w, err := typedWriter[T](c, obj, mutate)
	if err != nil {
		var zero T
		return zero, ResultUnchanged, err
	}
	w.create = func(ctx context.Context, o T) (T, error) { return c.Create(ctx, o, metav1.CreateOptions{}) }
	w.update = func(ctx context.Context, o T) (T, error) { return c.Update(ctx, o, metav1.UpdateOptions{}) }
	return w.run(ctx, backoff, opts)
}

// Patch is [PatchOnConflict] through a client-go typed client: it reads
// the object named by obj with c.Get, changes a copy with mutate and sends
// what changed with c.Patch as a JSON merge patch (types.MergePatchType)
// locked to the version read, again after a Conflict. Every rule of
// PatchOnConflict holds, obj in current's place, and its first attempt is
// Update's. A nil c, a zero obj or one without a name, a nil mutate, an
// invalid backoff or a nil ctx returns an error at once, calling nothing.
func Patch[T Object](ctx context.Context, backoff Backoff, c PatchClient[T], obj T,
	mutate func(T) error, opts ...Option) (T, error) {
	w, err := typedWriter[T](c, obj, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	name := w.name
	w.patch = func(ctx context.Context, _ T, data []byte) (T, error) {
		return c.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	}
	return w.runNoResult(ctx, backoff, opts)
}

// typed is a typed form's writer and the name of its object.
type typed[T Object] struct {
	writer[T]
	name string
}

// typedWriter checks the arguments of a typed form, c its client, and
// returns its writer, reading with c.Get, its write left to set.
func typedWriter[T Object](c getter[T], obj T, mutate func(T) error) (typed[T], error) {
	var zero T
	switch {
	case c == nil || isNilPointer(c):
		return typed[T]{}, errNilClient
	case obj == zero:
		return typed[T]{}, fmt.Errorf("retry: obj is a nil %T; it must name the object to write", obj)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return typed[T]{}, fmt.Errorf("retry: obj, a %T, has no object metadata: %w", obj, err)
	}
	name := acc.GetName()
	if name == "" {
		return typed[T]{}, fmt.Errorf("retry: obj, a %T, has no name; it must name the object to write", obj)
	}
	get := func(ctx context.Context) (T, error) { return c.Get(ctx, name, metav1.GetOptions{}) }
	w, err := newWriter(obj, get, mutate)
	return typed[T]{writer: w, name: name}, err
}

// isNilPointer reports whether c holds a nil pointer, a client variable
// never set, whose first call would panic.
func isNilPointer(c any) bool {
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
