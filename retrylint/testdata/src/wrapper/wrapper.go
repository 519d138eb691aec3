// Package wrapper exercises the rules over a project's own wrapper around
// a client: its Update takes a pointer to a Kubernetes object.
package wrapper

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Pods wraps a clientset.
type Pods struct{ c kubernetes.Interface }

func (p *Pods) Get(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return p.c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

func (p *Pods) Update(ctx context.Context, pod *corev1.Pod) error {
	_, err := p.c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

func stale(ctx context.Context, p *Pods, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod.Labels = nil
		return p.Update(ctx, pod) // want `^stale-object: Pods.Update writes pod`
	})
}

func dropped(ctx context.Context, p *Pods) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := p.Get(ctx, "ns", "p")
		if err != nil {
			return err
		}
		p.Update(ctx, pod) // want `^dropped-error: `
		return nil
	})
}

// fresh reads through the wrapper in the closure: nothing is reported.
func fresh(ctx context.Context, p *Pods) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := p.Get(ctx, "ns", "p")
		if err != nil {
			return err
		}
		return p.Update(ctx, pod)
	})
}

// storeUpdate: a cache.Store's Update(obj interface{}) is not a write.
func storeUpdate(store cache.Store, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		store.Update(pod)
		return nil
	})
}
