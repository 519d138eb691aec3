package ctrlretry

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kuberetry/retry"
)

// CreateOrUpdate is [controllerutil.CreateOrUpdate] with the races retried:
// it gets obj by its key, creates it when it is not found, else runs f and
// updates it when f changed it, and returns what it did. It takes the same
// arguments (f may be nil, as controllerutil allows) and opts.
//
// Each attempt is a call of controllerutil.CreateOrUpdate itself, so where
// nothing races it sends the same requests, returns the same
// OperationResult and errors, and leaves in obj the object as stored. What
// another writer's create, update or delete in between makes controllerutil
// return (AlreadyExists, a Conflict, NotFound from Update) is retried after
// the backoff's wait ([WithBackoff]); an apply conflict
// ([retry.IsApplyConflict]) and every other error are returned at once.
// Each retry starts from a deep copy of obj as passed and reads afresh
// through the reader ([WithReader]), and every create is cleared of the
// fields a create must not carry, as [retry.CreateOrUpdate] clears them.
// What differs from controllerutil, in full:
// https://github.com/kuberetry/retry/blob/main/docs/controller-runtime.md#moving-from-controllerutil.
//
// A nil c or obj, a nil ctx or an invalid backoff returns an error at once,
// sending nothing. With any error the OperationResult is that of the last
// attempt. Calls may run concurrently, each with an obj of its own.
func CreateOrUpdate(ctx context.Context, c client.Client, obj client.Object,
	f controllerutil.MutateFn, opts ...Option) (controllerutil.OperationResult, error) {
	return loop(ctx, "CreateOrUpdate", controllerutil.CreateOrUpdate, c, obj, f, opts)
}

// CreateOrPatch is [controllerutil.CreateOrPatch] with the races retried: it
// gets obj by its key, creates it when it is not found, else runs f and
// sends a merge patch of what f changed outside the status, then one of
// the status when f changed that, and returns what it did
// (OperationResultUpdated, OperationResultUpdatedStatus or
// OperationResultUpdatedStatusOnly, as controllerutil does).
//
// Every rule of [CreateOrUpdate] holds, each attempt being a call of
// controllerutil.CreateOrPatch, with Patch where CreateOrUpdate has Update:
// a Conflict or NotFound from either patch is retried. The patch carries
// no resourceVersion, so another writer's change in between is applied
// under it: https://github.com/kuberetry/retry/blob/main/docs/controller-runtime.md#moving-from-controllerutil.
func CreateOrPatch(ctx context.Context, c client.Client, obj client.Object,
	f controllerutil.MutateFn, opts ...Option) (controllerutil.OperationResult, error) {
	return loop(ctx, "CreateOrPatch", controllerutil.CreateOrPatch, c, obj, f, opts)
}

// operation is controllerutil.CreateOrUpdate or controllerutil.CreateOrPatch.
type operation func(context.Context, client.Client, client.Object, controllerutil.MutateFn) (controllerutil.OperationResult, error)

// loop runs op under the retry loop, each attempt through an
// attemptClient that reads, judges and clears as the doc of
// CreateOrUpdate says.
func loop(ctx context.Context, name string, op operation, c client.Client, obj client.Object,
	f controllerutil.MutateFn, opts []Option) (controllerutil.OperationResult, error) {
	if c == nil {
		return controllerutil.OperationResultNone, fmt.Errorf("retry: ctrlretry.%s: c is nil", name)
	}
	seed, err := seedOf(obj)
	if err != nil {
		return controllerutil.OperationResultNone, fmt.Errorf("retry: ctrlretry.%s: %w", name, err)
	}
	if f == nil { // controllerutil before controller-runtime v0.21 would call it
		f = func() error { return nil }
	}
	cfg := newConfig(opts)
	a := &attemptClient{Client: c, reader: cfg.reader}
	if a.reader == nil {
		a.reader = c
	}
	result := controllerutil.OperationResultNone
	err = retry.OnErrorWithContext(ctx, cfg.backoff, a.retriable, func(ctx context.Context) error {
		if a.attempts > 0 {
			reset(obj, seed)
		}
		a.start()
		var err error
		result, err = op(ctx, a, obj, f)
		return a.judge(err)
	}, cfg.loopOpts...)
	return result, err
}

// seedOf returns a deep copy of obj to reset obj to before each retry, or
// an error when obj is nil or its copy cannot be written into it.
func seedOf(obj client.Object) (client.Object, error) {
	if obj == nil {
		return nil, errors.New("obj is nil")
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("obj, a %T, is not a pointer", obj)
	}
	if v.IsNil() {
		return nil, fmt.Errorf("obj is a nil %T", obj)
	}
	copied := obj.DeepCopyObject()
	seed, ok := copied.(client.Object)
	if !ok || reflect.TypeOf(copied) != v.Type() {
		return nil, fmt.Errorf("obj's DeepCopyObject returned a %T, not a %T", copied, obj)
	}
	return seed, nil
}

// reset makes obj a deep copy of seed, in place, so that f, which holds
// obj, sees it: what controller-runtime's cache does to an object it reads
// into.
func reset(obj, seed client.Object) {
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(seed.DeepCopyObject()).Elem())
}
