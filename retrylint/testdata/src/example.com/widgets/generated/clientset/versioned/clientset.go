// Package versioned is a generated clientset of the Widget CRD.
package versioned

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	widgetsv1 "example.com/widgets/apis/v1"
)

type Interface interface {
	WidgetsV1() WidgetsV1Interface
}

type WidgetsV1Interface interface {
	Widgets(namespace string) WidgetInterface
}

type WidgetInterface interface {
	Update(ctx context.Context, w *widgetsv1.Widget, opts metav1.UpdateOptions) (*widgetsv1.Widget, error)
	UpdateStatus(ctx context.Context, w *widgetsv1.Widget, opts metav1.UpdateOptions) (*widgetsv1.Widget, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*widgetsv1.Widget, error)
}
