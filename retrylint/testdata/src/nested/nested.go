// Package nested exercises nested-retry.
package nested

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kretry "github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

func loops(ctx context.Context, c kubernetes.Interface, pods typedcorev1.PodInterface, cc client.Client, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error { return nil }); err != nil { // want `^nested-retry: retry.RetryOnConflict is a retry loop inside a Conflict-retry closure`
			return err
		}
		if err := kretry.OnError(kretry.DefaultRetry, kretry.IsTransient, func() error { return nil }); err != nil { // want `^nested-retry: retry.OnError `
			return err
		}
		if _, err := kretry.Update(ctx, kretry.DefaultRetry, pods, pod, func(*corev1.Pod) error { return nil }); err != nil { // want `^nested-retry: retry.Update `
			return err
		}
		_, err := ctrlretry.CreateOrUpdate(ctx, cc, pod, func() error { return nil }) // want `^nested-retry: ctrlretry.CreateOrUpdate `
		return err
	})
}

// Nothing is reported below.

// notConflict: an OnError whose predicate does not accept Conflicts is not
// a Conflict-retry closure.
func notConflict(ctx context.Context) error {
	return kretry.OnError(kretry.DefaultRetry, kretry.IsTransient, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error { return nil })
	})
}

// called: a loop in a function the closure calls is not looked into.
func called(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return inner()
	})
}

func inner() error {
	return retry.OnError(retry.DefaultRetry, apierrors.IsNotFound, func() error { return nil })
}

// sequential loops, one after the other.
func sequential(ctx context.Context, c kubernetes.Interface) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return nil }); err != nil {
		return err
	}
	_, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	return err
}
