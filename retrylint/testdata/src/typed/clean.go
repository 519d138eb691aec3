package typed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kretry "github.com/kuberetry/retry"
)

// Nothing is reported in this file: each function is one line of the
// contract's "Nothing is reported for".

// readInClosure reads the object in the closure, with a shadowing define.
func readInClosure(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Spec.NodeName = "n1"
		_, err = c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// rereadOnRetry assigns the object on some paths only: on a retry.
func rereadOnRetry(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			var err error
			pod, err = c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
		}
		first = false
		_, err := c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// rereadAfterConflict assigns the object after the write, for the next attempt.
func rereadAfterConflict(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); gerr == nil {
				*pod = *fresh
			}
		}
		return err
	})
}

// builtInClosure declares the object in the closure.
func builtInClosure(ctx context.Context, c kubernetes.Interface, rv string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: rv}}
		_, err := c.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// deepCopyOfFresh copies an object read in the closure.
func deepCopyOfFresh(ctx context.Context, c kubernetes.Interface) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod := got.DeepCopy()
		_, err = c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// setResourceVersion writes a desired state at the version just read, on
// purpose, both ways the rule knows.
func setResourceVersion(ctx context.Context, c kubernetes.Interface, d dynamic.Interface, gvr dynamic.GroupVersionResource, desired *corev1.ConfigMap, u *unstructured.Unstructured) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.CoreV1().ConfigMaps("ns").Get(ctx, desired.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		desired.ResourceVersion = cur.ResourceVersion
		_, err = c.CoreV1().ConfigMaps("ns").Update(ctx, desired, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := d.Resource(gvr).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = d.Resource(gvr).Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// otherWrites: a Patch, a Create and a Delete are not writes of the rules.
func otherWrites(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if _, err := c.CoreV1().Pods("ns").Patch(ctx, pod.Name, types.PatchType("merge"), nil, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch: %v", err)
		}
		c.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
		c.CoreV1().Pods("ns").Delete(ctx, pod.Name, metav1.DeleteOptions{})
		return nil
	})
}

// outsideLoop writes outside any Conflict-retry closure.
func outsideLoop(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
	return kretry.OnError(kretry.DefaultRetry, kretry.IsTransient, func() error {
		_, err := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// calledFunction: the functions a closure calls are not looked into.
func calledFunction(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return writeIt(ctx, c, pod)
	})
}

func writeIt(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
	return nil
}

// nestedLiteral: a function literal inside the closure is not the closure.
func nestedLiteral(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		write := func() error {
			_, err := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
			return err
		}
		return write()
	})
}

// notALiteral: a fn that is not a function literal is not looked into.
func notALiteral(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) error {
	fn := func() error {
		_, err := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, fn)
}

// wrapped keeps the Conflict with %w.
func wrapped(ctx context.Context, c kubernetes.Interface) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, err := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update %s: %w", pod.Name, err)
		}
		return nil
	})
}

// readIntoViaAddress gives the variable's address to a function that may set it.
func readIntoViaAddress(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, refresh func(**corev1.Pod) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := refresh(&pod); err != nil {
			return err
		}
		_, err := c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}
