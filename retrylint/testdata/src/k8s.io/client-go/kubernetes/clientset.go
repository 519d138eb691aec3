// Package kubernetes is a stub of client-go's clientset.
package kubernetes

import corev1 "k8s.io/client-go/kubernetes/typed/core/v1"

type Interface interface {
	CoreV1() corev1.CoreV1Interface
}
