package typed

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kuberetry/retry"
)

// TestTypedFormsOnTheFakeClientset runs each typed form once through this
// client-go's generated clients (its fake clientset) and reads back what
// it stored.
func TestTypedFormsOnTheFakeClientset(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	cms := cs.CoreV1().ConfigMaps("ns")
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "cm"}

	_, res, err := retry.Ensure(ctx, retry.DefaultRetry, cms, &corev1.ConfigMap{ObjectMeta: meta},
		func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"k": "ensured"}; return nil })
	if err != nil || res != retry.ResultCreated {
		t.Fatalf("Ensure: %v, %v; want %v, nil", res, err, retry.ResultCreated)
	}
	if _, err := retry.Update(ctx, retry.DefaultRetry, cms, &corev1.ConfigMap{ObjectMeta: meta},
		func(cm *corev1.ConfigMap) error { cm.Data["k"] = "updated"; return nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := retry.Patch(ctx, retry.DefaultRetry, cms, &corev1.ConfigMap{ObjectMeta: meta},
		func(cm *corev1.ConfigMap) error { cm.Data["p"] = "patched"; return nil }); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	cm, err := cms.Get(ctx, "cm", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "updated" || cm.Data["p"] != "patched" {
		t.Fatalf("stored %v, %v; want k=updated, p=patched", cm, err)
	}

	deps := cs.AppsV1().Deployments("ns")
	if _, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := retry.UpdateStatus(ctx, retry.DefaultRetry, deps, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}},
		func(d *appsv1.Deployment) error { d.Status.ReadyReplicas = 2; return nil }); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	d, err := deps.Get(ctx, "d", metav1.GetOptions{})
	if err != nil || d.Status.ReadyReplicas != 2 {
		t.Fatalf("stored %v, %v; want 2 ready replicas", d, err)
	}
}
