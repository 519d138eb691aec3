// Package guide holds docs/retrylint.md's examples as the guide shows
// them: each wrong one is reported (its want comment), each right one is
// not. The repository's guide test finds each of the guide's Go blocks
// here.
package guide

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	widgetsv1 "example.com/widgets/apis/v1"

	kretry "github.com/kuberetry/retry"
	"github.com/kuberetry/retry/ctrlretry"
)

func staleWrong(ctx context.Context, pods typedcorev1.PodInterface, name string) error {
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod.Labels["app"] = "web"
		_, err := pods.Update(ctx, pod, metav1.UpdateOptions{}) // want `stale-object`
		return err
	})
}

func staleRight(ctx context.Context, pods typedcorev1.PodInterface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Labels["app"] = "web"
		_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func staleOneCall(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod) error {
	_, err := kretry.Update(ctx, kretry.DefaultRetry, pods, pod, func(pod *corev1.Pod) error {
		pod.Labels["app"] = "web"
		return nil
	})
	return err
}

func staleControllerRuntime(ctx context.Context, c client.Client, w *widgetsv1.Widget) error {
	_, err := ctrlretry.CreateOrUpdate(ctx, c, w, func() error {
		w.Spec.Size = 3
		return nil
	})
	return err
}

func cachedWrong(ctx context.Context, pods typedcorev1.PodInterface, lister listers.PodNamespaceLister, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cached, err := lister.Get(name) // want `cached-read`
		if err != nil {
			return err
		}
		pod := cached.DeepCopy()
		pod.Labels["app"] = "web"
		_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func lostWrong(ctx context.Context, pods typedcorev1.PodInterface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Labels["app"] = "web"
		if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("label pod %s: %v", name, err) // want `lost-conflict`
		}
		return nil
	})
}

func lostRight(ctx context.Context, pods typedcorev1.PodInterface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Labels["app"] = "web"
		if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("label pod %s: %w", name, err)
		}
		return nil
	})
}

func droppedWrong(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var w widgetsv1.Widget
		if err := c.Get(ctx, key, &w); err != nil {
			return err
		}
		w.Status.Ready = true
		_ = c.Status().Update(ctx, &w) // want `dropped-error`
		return nil
	})
}

func droppedRight(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var w widgetsv1.Widget
		if err := c.Get(ctx, key, &w); err != nil {
			return err
		}
		w.Status.Ready = true
		return c.Status().Update(ctx, &w)
	})
}

func nestedWrong(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod, label func(*corev1.Pod) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := kretry.Update(ctx, kretry.DefaultRetry, pods, pod, label) // want `nested-retry`
		return err
	})
}

func nestedRight(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod, label func(*corev1.Pod) error) error {
	_, err := kretry.Update(ctx, kretry.DefaultRetry, pods, pod, label)
	return err
}
