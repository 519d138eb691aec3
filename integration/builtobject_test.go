package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// The other writer's change and the caller's, in TestBuiltObjectKeepsOtherWriter.
const (
	otherFinalizer = "kuberetry.test/other"
	mineFinalizer  = "kuberetry.test/mine"
)

// addMine is the caller's mutate for a ConfigMap: it sets a key of its own
// and adds its finalizer to those it finds, as controllerutil.AddFinalizer
// does. The key is a map entry, which a merge patch sends alone; the
// finalizers are a list, which a merge patch sends whole, so a patch from
// an object that was never read drops the other writer's finalizer.
func addMine(cm *corev1.ConfigMap) error {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["mine"] = "set"
	if !slices.Contains(cm.Finalizers, mineFinalizer) {
		cm.Finalizers = append(cm.Finalizers, mineFinalizer)
	}
	return nil
}

// addMineCondition is the caller's mutate for a Deployment's status: it
// adds a condition of its own to those it finds (a list, as above).
func addMineCondition(d *appsv1.Deployment) error {
	for _, c := range d.Status.Conditions {
		if c.Type == "MineReady" {
			return nil
		}
	}
	d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
		Type: "MineReady", Status: corev1.ConditionTrue, Reason: "Mine", Message: "set by the caller"})
	return nil
}

// TestBuiltObjectKeepsOtherWriter is issue 26's data-loss bug on the real
// apiserver: an object is stored, another writer changes it, and then a
// caller passes every write form an object it BUILT (its name and
// namespace, no resourceVersion) with a mutate that changes another field.
// For each form (the closure forms UpdateOnConflict, PatchOnConflict and
// CreateOrUpdate over a typed client, the typed Update, UpdateStatus,
// Patch and Ensure) it asserts that the other writer's change survives,
// that the caller's is stored, and that on the wire the form read the
// object first (a GET) and then wrote it once: a built object is never
// written blind, since a write without a resourceVersion is applied
// unconditionally over whatever is stored.
func TestBuiltObjectKeepsOtherWriter(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "built-object-")

	configMapForms := []struct {
		name  string
		write string // the write request's verb
		call  func(context.Context, kubernetes.Interface, *corev1.ConfigMap) error
	}{
		{"UpdateOnConflict", "update", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			cms := c.CoreV1().ConfigMaps(built.Namespace)
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, built,
				func(ctx context.Context) (*corev1.ConfigMap, error) {
					return cms.Get(ctx, built.Name, metav1.GetOptions{})
				},
				addMine,
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					return cms.Update(ctx, cm, metav1.UpdateOptions{})
				})
			return err
		}},
		{"PatchOnConflict", "patch", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			cms := c.CoreV1().ConfigMaps(built.Namespace)
			_, err := retry.PatchOnConflict(ctx, retry.DefaultRetry, built,
				func(ctx context.Context) (*corev1.ConfigMap, error) {
					return cms.Get(ctx, built.Name, metav1.GetOptions{})
				},
				addMine,
				func(ctx context.Context, cm *corev1.ConfigMap, data []byte) (*corev1.ConfigMap, error) {
					return cms.Patch(ctx, cm.Name, types.MergePatchType, data, metav1.PatchOptions{})
				})
			return err
		}},
		{"CreateOrUpdate", "update", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			cms := c.CoreV1().ConfigMaps(built.Namespace)
			_, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, built,
				func(ctx context.Context) (*corev1.ConfigMap, error) {
					return cms.Get(ctx, built.Name, metav1.GetOptions{})
				},
				addMine,
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					return cms.Create(ctx, cm, metav1.CreateOptions{})
				},
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					return cms.Update(ctx, cm, metav1.UpdateOptions{})
				})
			if err == nil && result != retry.ResultUpdated {
				return fmt.Errorf("result %s, want %s", result, retry.ResultUpdated)
			}
			return err
		}},
		{"Update", "update", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			_, err := retry.Update(ctx, retry.DefaultRetry, c.CoreV1().ConfigMaps(built.Namespace), built, addMine)
			return err
		}},
		{"Patch", "patch", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			_, err := retry.Patch(ctx, retry.DefaultRetry, c.CoreV1().ConfigMaps(built.Namespace), built, addMine)
			return err
		}},
		{"Ensure", "update", func(ctx context.Context, c kubernetes.Interface, built *corev1.ConfigMap) error {
			_, result, err := retry.Ensure(ctx, retry.DefaultRetry, c.CoreV1().ConfigMaps(built.Namespace), built, addMine)
			if err == nil && result != retry.ResultUpdated {
				return fmt.Errorf("result %s, want %s", result, retry.ResultUpdated)
			}
			return err
		}},
	}
	for _, f := range configMapForms {
		t.Run(f.name, func(t *testing.T) {
			ctx := t.Context()
			name := strings.ToLower(f.name)
			cms := s.Client.CoreV1().ConfigMaps(ns)
			stored, err := cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data:       map[string]string{"base": "1"},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The other writer, after the object was stored.
			other := stored.DeepCopy()
			other.Data["other"] = "kept"
			other.Finalizers = append(other.Finalizers, otherFinalizer)
			if _, err := cms.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}

			wire := &reqcount.Counter{KeepRequests: true}
			client, err := kubernetes.NewForConfig(wire.Config(s.Config))
			if err != nil {
				t.Fatal(err)
			}
			built := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			if err := f.call(ctx, client, built); err != nil {
				t.Fatalf("%s of a built object: %v", f.name, err)
			}
			if built.ResourceVersion != "" || built.Data != nil || built.Finalizers != nil {
				t.Errorf("%s modified the caller's object: %+v", f.name, built)
			}

			got, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: stored data %v, finalizers %v; on the wire %v", f.name, got.Data, got.Finalizers, sequence(wire))
			if got.Data["other"] != "kept" || !slices.Contains(got.Finalizers, otherFinalizer) {
				t.Errorf("%s lost the other writer's change: data %v, finalizers %v; want other=kept and %s",
					f.name, got.Data, got.Finalizers, otherFinalizer)
			}
			if got.Data["base"] != "1" {
				t.Errorf("%s lost the stored key base: data %v", f.name, got.Data)
			}
			if got.Data["mine"] != "set" || !slices.Contains(got.Finalizers, mineFinalizer) {
				t.Errorf("%s did not store the caller's change: data %v, finalizers %v; want mine=set and %s",
					f.name, got.Data, got.Finalizers, mineFinalizer)
			}
			if want := []string{"get configmaps 200", f.write + " configmaps 200"}; !slices.Equal(sequence(wire), want) {
				t.Errorf("%s of a built object sent %v, want %v: a read, then the write", f.name, sequence(wire), want)
			}
		})
	}

	t.Run("UpdateStatus", func(t *testing.T) {
		ctx := t.Context()
		deps := s.Client.AppsV1().Deployments(ns)
		labels := map[string]string{"app": "built-object"}
		stored, err := deps.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "updatestatus"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The other writer sets a condition and a field of the status.
		other := stored.DeepCopy()
		other.Status.ObservedGeneration = stored.Generation
		other.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: "OtherReady", Status: corev1.ConditionTrue, Reason: "Other", Message: "set by the other writer"}}
		if _, err := deps.UpdateStatus(ctx, other, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}

		wire := &reqcount.Counter{KeepRequests: true}
		client, err := kubernetes.NewForConfig(wire.Config(s.Config))
		if err != nil {
			t.Fatal(err)
		}
		built := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "updatestatus", Namespace: ns}}
		if _, err := retry.UpdateStatus(ctx, retry.DefaultRetry, client.AppsV1().Deployments(ns), built, addMineCondition); err != nil {
			t.Fatalf("UpdateStatus of a built object: %v", err)
		}
		got, err := deps.Get(ctx, "updatestatus", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var conds []string
		for _, c := range got.Status.Conditions {
			conds = append(conds, string(c.Type))
		}
		t.Logf("UpdateStatus: stored conditions %v, observedGeneration %d; on the wire %v", conds, got.Status.ObservedGeneration, sequence(wire))
		if !slices.Contains(conds, "OtherReady") || got.Status.ObservedGeneration != stored.Generation {
			t.Errorf("UpdateStatus lost the other writer's status: conditions %v, observedGeneration %d; want OtherReady and %d",
				conds, got.Status.ObservedGeneration, stored.Generation)
		}
		if !slices.Contains(conds, "MineReady") {
			t.Errorf("UpdateStatus did not store the caller's condition: conditions %v", conds)
		}
		if want := []string{"get deployments 200", "update deployments 200"}; !slices.Equal(sequence(wire), want) {
			t.Errorf("UpdateStatus of a built object sent %v, want %v: a read, then the write", sequence(wire), want)
		}
	})
}

// sequence returns the requests wire kept, in order, as "verb resource code".
func sequence(wire *reqcount.Counter) []string {
	var out []string
	for _, r := range wire.Requests() {
		out = append(out, fmt.Sprintf("%s %s %d", r.Verb, r.Resource, r.Code))
	}
	return out
}
