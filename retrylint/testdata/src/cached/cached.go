// Package cached exercises cached-read, which only -cached-read reports.
package cached

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	widgetsv1 "example.com/widgets/apis/v1"
	widgets "example.com/widgets/generated/clientset/versioned"
	widgetlisters "example.com/widgets/generated/listers/widgets/v1"
)

func lister(ctx context.Context, c kubernetes.Interface, l listers.PodLister) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := l.Pods("ns").Get("p") // want `^cached-read: PodNamespaceLister.Get reads an informer's cache`
		if err != nil {
			return err
		}
		pod = pod.DeepCopy()
		_, err = c.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

func generatedLister(ctx context.Context, c widgets.Interface, l widgetlisters.WidgetNamespaceLister) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w, err := l.Get("w") // want `^cached-read: WidgetNamespaceLister.Get `
		if err != nil {
			return err
		}
		_, err = c.WidgetsV1().Widgets("ns").Update(ctx, w.DeepCopy(), metav1.UpdateOptions{})
		return err
	})
}

func indexer(ctx context.Context, c kubernetes.Interface, idx cache.Indexer) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, ok, err := idx.GetByKey("ns/p") // want `^cached-read: Store.GetByKey `
		if err != nil || !ok {
			return err
		}
		if _, err := idx.ByIndex("node", "n1"); err != nil { // want `^cached-read: Indexer.ByIndex `
			return err
		}
		_ = idx.List() // want `^cached-read: Store.List `
		_, err = c.CoreV1().Pods("ns").Update(ctx, obj.(*corev1.Pod).DeepCopy(), metav1.UpdateOptions{})
		return err
	})
}

// outside: a cached read outside a Conflict-retry closure is not reported.
func outside(l widgetlisters.WidgetNamespaceLister) (*widgetsv1.Widget, error) {
	return l.Get("w")
}
