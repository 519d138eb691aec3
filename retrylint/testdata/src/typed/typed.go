// Package typed exercises the rules over client-go's typed clients, a
// generated clientset of a CRD and the dynamic client.
package typed

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	widgets "example.com/widgets/generated/clientset/versioned"

	kretry "github.com/kuberetry/retry"
)

// staleTyped writes the pod read before the loop: every retry conflicts.
func staleTyped(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod.Spec.NodeName = "n1"
		_, err := c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}) // want `^stale-object: PodInterface.Update writes pod, read before the loop`
		return err
	})
}

// staleDeepCopy copies the stale pod in the closure: still stale.
func staleDeepCopy(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := pod.DeepCopy()
		p.Status.Phase = "Running"
		_, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}) // want `^stale-object: PodInterface.UpdateStatus writes pod`
		return err
	})
}

// staleDeepCopyInline passes the copy straight to the write.
func staleDeepCopyInline(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := c.CoreV1().Pods(pod.Namespace).Update(ctx, pod.DeepCopy(), metav1.UpdateOptions{}) // want `^stale-object: PodInterface.Update writes pod`
		return err
	})
}

// staleCRD writes a Widget of a generated clientset.
func staleCRD(ctx context.Context, c widgets.Interface, ns, name string) error {
	w, err := c.WidgetsV1().Widgets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.Spec.Size = 3
		_, err := c.WidgetsV1().Widgets(ns).Update(ctx, w, metav1.UpdateOptions{}) // want `^stale-object: WidgetInterface.Update writes w`
		return err
	})
}

// staleDynamic writes an unstructured object with the dynamic client, in
// this module's loop.
func staleDynamic(ctx context.Context, d dynamic.Interface, gvr dynamic.GroupVersionResource, u *unstructured.Unstructured) error {
	return kretry.RetryOnConflictWithContext(ctx, kretry.DefaultRetry, func(ctx context.Context) error {
		_, err := d.Resource(gvr).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}) // want `^stale-object: ResourceInterface.Update writes u`
		return err
	})
}

// staleOnError is an OnError whose predicate accepts Conflicts.
func staleOnError(ctx context.Context, c kubernetes.Interface, cm *corev1.ConfigMap) error {
	return retry.OnError(retry.DefaultBackoff, apierrors.IsConflict, func() error {
		_, err := c.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}) // want `^stale-object: ConfigMapInterface.Update writes cm`
		return err
	})
}

// staleOnErrorLiteral is an OnError whose predicate is a literal calling IsConflict.
func staleOnErrorLiteral(ctx context.Context, c kubernetes.Interface, cm *corev1.ConfigMap) error {
	return kretry.OnErrorWithContext(ctx, kretry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || kretry.IsTransient(err)
	}, func(ctx context.Context) error {
		_, err := c.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}) // want `^stale-object: ConfigMapInterface.Update writes cm`
		return err
	})
}

// staleOnErrorValue returns the written object.
func staleOnErrorValue(ctx context.Context, c kubernetes.Interface, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return kretry.OnErrorValue(ctx, kretry.DefaultRetry, apierrors.IsConflict, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return c.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}) // want `^stale-object: ConfigMapInterface.Update writes cm`
	})
}

// staleValue writes the address of a struct read before the loop.
func staleValue(ctx context.Context, c kubernetes.Interface, pod corev1.Pod) error {
	return kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		_, err := c.CoreV1().Pods("ns").Update(ctx, &pod, metav1.UpdateOptions{}) // want `^stale-object: PodInterface.Update writes pod`
		return err
	})
}

// dropped discards the write's error, as a statement and into _.
func dropped(ctx context.Context, c kubernetes.Interface) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})              // want `^dropped-error: the error of PodInterface.Update is discarded`
		_, _ = c.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{}) // want `^dropped-error: the error of PodInterface.UpdateStatus is discarded`
		return nil
	})
}

// lost formats the write's error without %w, in each way the rule knows.
func lost(ctx context.Context, c kubernetes.Interface, which int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %v", err) // a read's error: no Conflict to lose
		}
		_, err = c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		switch which {
		case 0:
			return fmt.Errorf("update %s: %v", pod.Name, err) // want `^lost-conflict: the closure returns the error of a write \(err\) formatted without %w`
		case 1:
			return errors.New(err.Error()) // want `^lost-conflict: `
		case 2:
			return fmt.Errorf("update: %s", err.Error()) // want `^lost-conflict: `
		case 3:
			err = fmt.Errorf("update: %+v", err) // want `^lost-conflict: `
			return err
		}
		return fmt.Errorf("update %s: %w", pod.Name, err)
	})
}

// lostIfInit keeps the write's error in an if statement's own variable.
func lostIfInit(ctx context.Context, c kubernetes.Interface) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, uerr := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); uerr != nil {
			return fmt.Errorf("update: %v", uerr) // want `^lost-conflict: the closure returns the error of a write \(uerr\)`
		}
		return nil
	})
}
