// Package ctrlretry is a stub of this module's controller-runtime package.
package ctrlretry

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

type Option func()

func CreateOrUpdate(ctx context.Context, c client.Client, obj client.Object, mutate func() error, opts ...Option) (string, error) {
	return "", nil
}
