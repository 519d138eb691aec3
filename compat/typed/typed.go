// Package typed holds, for make compat, what the typed forms must accept:
// client-go's generated typed clients, compiled against each client-go
// version the compatibility matrix names.
package typed

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kuberetry/retry"
)

// A namespaced kind, a kind with a status subresource, a cluster-scoped one.
var (
	_ retry.UpdateClient[*corev1.ConfigMap] = corev1client.ConfigMapInterface(nil)
	_ retry.EnsureClient[*corev1.ConfigMap] = corev1client.ConfigMapInterface(nil)
	_ retry.PatchClient[*corev1.ConfigMap]  = corev1client.ConfigMapInterface(nil)

	_ retry.UpdateClient[*appsv1.Deployment]       = appsv1client.DeploymentInterface(nil)
	_ retry.UpdateStatusClient[*appsv1.Deployment] = appsv1client.DeploymentInterface(nil)
	_ retry.EnsureClient[*appsv1.Deployment]       = appsv1client.DeploymentInterface(nil)
	_ retry.PatchClient[*appsv1.Deployment]        = appsv1client.DeploymentInterface(nil)

	_ retry.UpdateClient[*corev1.Namespace]       = corev1client.NamespaceInterface(nil)
	_ retry.UpdateStatusClient[*corev1.Namespace] = corev1client.NamespaceInterface(nil)
	_ retry.EnsureClient[*corev1.Namespace]       = corev1client.NamespaceInterface(nil)
	_ retry.PatchClient[*corev1.Namespace]        = corev1client.NamespaceInterface(nil)
)
