// Package fix exercises stale-object's suggested fix: the read that
// produced the object, made again at the top of the closure.
package fix

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	widgetsv1 "example.com/widgets/apis/v1"
)

func typed(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != "" {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod.Spec.NodeName = "n1"
		_, err := c.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}) // want `^stale-object: `
		return err
	})
}

func controllerRuntime(ctx context.Context, c client.Client, key client.ObjectKey) error {
	w := &widgetsv1.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.Status.Ready = true
		return c.Status().Update(ctx, w) // want `^stale-object: `
	})
}

// deepCopy writes a copy of the object read before the loop.
func deepCopy(ctx context.Context, c kubernetes.Interface, ns string) error {
	cm, getErr := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if getErr != nil {
		return getErr
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		updated := cm.DeepCopy()
		updated.Data = map[string]string{"k": "v"}
		_, err := c.CoreV1().ConfigMaps(ns).Update(ctx, updated, metav1.UpdateOptions{}) // want `^stale-object: ConfigMapInterface.Update writes cm`
		return err
	})
}

// parameter: the object is the caller's; there is no read to repeat, so
// no fix.
func parameter(ctx context.Context, c kubernetes.Interface, w *widgetsv1.Widget, cc client.Client) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return cc.Update(ctx, w) // want `^stale-object: `
	})
}

// inOtherBlock: the read is in a block that does not hold the loop, so
// its variables may not be in scope there: no fix.
func inOtherBlock(ctx context.Context, c kubernetes.Interface, ns string, fresh bool) error {
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if fresh {
		cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, "cm2", metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}) // want `^stale-object: `
		return err
	})
}
