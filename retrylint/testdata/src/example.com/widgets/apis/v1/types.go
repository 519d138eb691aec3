// Package v1 is the API of a CRD, Widget.
package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

type Widget struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   WidgetSpec
	Status WidgetStatus
}

type WidgetSpec struct{ Size int }
type WidgetStatus struct{ Ready bool }

func (w *Widget) DeepCopy() *Widget { c := *w; return &c }

func (w *Widget) DeepCopyObject() interface{} { return w.DeepCopy() }
