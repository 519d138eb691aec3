// Package client is a stub of controller-runtime's client.
package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type Object interface {
	metav1.Object
	DeepCopyObject() interface{}
}

type ObjectKey = types.NamespacedName

type GetOption interface{}
type UpdateOption interface{}
type SubResourceUpdateOption interface{}
type Patch interface{}
type PatchOption interface{}

type Reader interface {
	Get(ctx context.Context, key ObjectKey, obj Object, opts ...GetOption) error
}

type Writer interface {
	Update(ctx context.Context, obj Object, opts ...UpdateOption) error
	Patch(ctx context.Context, obj Object, patch Patch, opts ...PatchOption) error
}

type SubResourceWriter interface {
	Update(ctx context.Context, obj Object, opts ...SubResourceUpdateOption) error
}

type StatusClient interface {
	Status() SubResourceWriter
}

type Client interface {
	Reader
	Writer
	StatusClient
}

func ObjectKeyFromObject(obj Object) ObjectKey { return ObjectKey{} }
