// Package retry is a stub of this module's root package.
package retry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type Backoff struct{ Steps int }

var DefaultRetry = Backoff{Steps: 5}

type Option func()

type Object interface {
	metav1.Object
}

type UpdateClient[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

func RetryOnConflict(backoff Backoff, fn func() error, opts ...Option) error { return fn() }

func RetryOnConflictWithContext(ctx context.Context, backoff Backoff, fn func(context.Context) error, opts ...Option) error {
	return fn(ctx)
}

func OnError(backoff Backoff, retriable func(error) bool, fn func() error, opts ...Option) error {
	return fn()
}

func OnErrorWithContext(ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) error, opts ...Option) error {
	return fn(ctx)
}

func OnErrorValue[T any](ctx context.Context, backoff Backoff, retriable func(error) bool, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	return fn(ctx)
}

func IsTransient(err error) bool { return false }

func Update[T Object](ctx context.Context, backoff Backoff, c UpdateClient[T], obj T, mutate func(T) error, opts ...Option) (T, error) {
	return obj, nil
}
