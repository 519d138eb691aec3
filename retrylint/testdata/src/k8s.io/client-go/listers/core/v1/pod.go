// Package v1 is a stub of client-go's core/v1 listers.
package v1

import corev1 "k8s.io/api/core/v1"

type Selector interface{}

type PodLister interface {
	List(selector Selector) ([]*corev1.Pod, error)
	Pods(namespace string) PodNamespaceLister
}

type PodNamespaceLister interface {
	List(selector Selector) ([]*corev1.Pod, error)
	Get(name string) (*corev1.Pod, error)
}
