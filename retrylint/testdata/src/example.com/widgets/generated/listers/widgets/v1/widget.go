// Package v1 is a generated lister of the Widget CRD.
package v1

import widgetsv1 "example.com/widgets/apis/v1"

type WidgetNamespaceLister interface {
	Get(name string) (*widgetsv1.Widget, error)
}
