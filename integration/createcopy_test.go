package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// testCreateFromStoredCopy records what the real apiserver does with each
// metadata field of an object created from a stored copy (read from the
// server, then deleted there), the object CreateOrUpdate's create path
// starts from when current came from a cache. It is the evidence for what
// that path clears:
//   - resourceVersion: the create fails, with a 500 that IsTransient
//     accepts, so it must be cleared;
//   - managedFields: kept for every field the new object does not carry,
//     so a manager that never wrote the new object owns a field it does
//     not have, and another manager's apply of that field conflicts; it
//     must be cleared;
//   - uid, creationTimestamp, deletionTimestamp,
//     deletionGracePeriodSeconds, selfLink: replaced or cleared by the
//     server;
//   - generation: reset by a kind that tracks it (a Deployment), kept as
//     sent by one that does not (a ConfigMap);
//   - status: dropped by a kind with a status subresource;
//   - ownerReferences (to a live or a deleted owner), finalizers (even
//     from a copy read while the object was being deleted), labels and
//     data: kept, as the desired state they are.
func testCreateFromStoredCopy(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "copy-")
	cms := s.Client.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ResourceVersion", func(t *testing.T) {
		stored := storedCopy(ctx, t, cms, "with-rv", false, nil)
		_, err := cms.Create(ctx, stored, metav1.CreateOptions{})
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError ||
			!strings.Contains(err.Error(), "resourceVersion should not be set") {
			t.Fatalf("create with a resourceVersion: %v, want a 500 saying it should not be set", err)
		}
		// A create that can never succeed, retried by a loop that
		// trusts IsTransient.
		if !retry.IsTransient(err) {
			t.Errorf("IsTransient is false on %v", err)
		}
	})

	t.Run("SystemFields", func(t *testing.T) {
		// Read while being deleted: a finalizer holds the object, so the
		// copy carries a deletionTimestamp, then the finalizer goes and
		// so does the object.
		stored := storedCopy(ctx, t, cms, "terminating", true, func(cm *corev1.ConfigMap) {
			cm.Finalizers = []string{"example.com/hold"}
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		})
		if stored.DeletionTimestamp == nil || stored.DeletionGracePeriodSeconds == nil {
			t.Fatalf("the copy read while terminating has deletionTimestamp %v, grace period %v", stored.DeletionTimestamp, stored.DeletionGracePeriodSeconds)
		}
		c := stored.DeepCopy()
		c.ResourceVersion = ""
		c.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		// selfLink is deprecated, and the server no longer sets it; a copy
		// from an old cache or another tool may still carry one.
		c.SetSelfLink("/api/v1/namespaces/elsewhere/configmaps/terminating")
		got, err := cms.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create from the copy with only resourceVersion cleared: %v", err)
		}
		defer releaseFinalizers(ctx, t, cms, got.Name)
		if got.UID == stored.UID || got.UID == "" {
			t.Errorf("uid %q, want a new one (the copy's was %q)", got.UID, stored.UID)
		}
		if !got.CreationTimestamp.After(c.CreationTimestamp.Time) {
			t.Errorf("creationTimestamp %v kept from the copy", got.CreationTimestamp)
		}
		if got.DeletionTimestamp != nil || got.DeletionGracePeriodSeconds != nil || got.GetSelfLink() != "" {
			t.Errorf("deletionTimestamp %v, grace period %v, selfLink %q; want all cleared", got.DeletionTimestamp, got.DeletionGracePeriodSeconds, got.GetSelfLink())
		}
		if !slices.Equal(got.Finalizers, stored.Finalizers) || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != owner.UID {
			t.Errorf("finalizers %v, ownerReferences %v; want the copy's %v and the live owner", got.Finalizers, got.OwnerReferences, stored.Finalizers)
		}
	})

	t.Run("ManagedFields", func(t *testing.T) {
		// Three managers own the stored copy's fields: creator (a),
		// applier (x, y, with Server-Side Apply) and updater (b).
		stored := storedCopy(ctx, t, cms, "managed", false, nil)
		names := managers(stored)
		if !slices.Equal(names, []string{"applier", "creator", "updater"}) {
			t.Fatalf("the stored copy's managers are %v", names)
		}
		// The copy as a create path sends it after a mutate that drops b
		// and x, with its managedFields kept.
		c := stored.DeepCopy()
		c.ResourceVersion = ""
		delete(c.Data, "b")
		delete(c.Data, "x")
		got, err := cms.Create(ctx, c, metav1.CreateOptions{FieldManager: "reconciler"})
		if err != nil {
			t.Fatal(err)
		}
		if !owns(got, "updater", "b") || !owns(got, "applier", "x") || !owns(got, "reconciler", "a") || !owns(got, "reconciler", "y") {
			t.Errorf("managedFields %s: want the stale owners of the dropped fields kept (updater b, applier x) and the rest the reconciler's", fieldOwners(got))
		}
		// The stale entry is not harmless: another manager's apply of b
		// conflicts with a manager that never wrote this object, over a
		// field it does not have.
		_, err = cms.Patch(ctx, got.Name, types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"mine"}}`),
			metav1.PatchOptions{FieldManager: "newcomer"})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "updater"`) {
			t.Errorf("newcomer's apply of b: %v, want an apply conflict with updater", err)
		}
		// With managedFields cleared, the creating manager owns it all.
		c = stored.DeepCopy()
		c.Name, c.ResourceVersion, c.ManagedFields = "managed-cleared", "", nil
		got, err = cms.Create(ctx, c, metav1.CreateOptions{FieldManager: "reconciler"})
		if err != nil {
			t.Fatal(err)
		}
		if names := managers(got); !slices.Equal(names, []string{"reconciler"}) {
			t.Errorf("cleared managedFields: managers %v, want the reconciler alone", names)
		}
	})

	t.Run("Generation", func(t *testing.T) {
		deps := s.Client.AppsV1().Deployments(ns)
		d, err := deps.Create(ctx, testDeployment("gen", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for n := int32(2); n <= 3; n++ {
			d.Spec.Replicas = ptr.To(n)
			if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := deps.Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c := d.DeepCopy()
		c.ResourceVersion = ""
		c.Status.Replicas, c.Status.ObservedGeneration = 3, d.Generation
		got, err := deps.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 3 || got.Generation != 1 || got.Status.Replicas != 0 || got.Status.ObservedGeneration != 0 {
			t.Errorf("Deployment: copy at generation %d created at generation %d with status %+v; want 3, 1 and an empty status", d.Generation, got.Generation, got.Status)
		}
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gen", Generation: 7}}, metav1.CreateOptions{})
		if err != nil || cm.Generation != 7 {
			t.Errorf("ConfigMap created with generation 7: %v, stored generation %d; want it kept", err, cm.Generation)
		}
	})

	t.Run("DeletedOwner", func(t *testing.T) {
		gone := types.UID("00000000-0000-0000-0000-000000000000")
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: gone}}}}, metav1.CreateOptions{})
		if err != nil || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != gone {
			t.Errorf("create owned by an owner that does not exist: %v, %v; want it accepted as sent", err, got.OwnerReferences)
		}
	})
}

// storedCopy creates the ConfigMap name (data a=1, label app=copy, as
// manager creator, after prepare), has manager applier apply x and y and
// manager updater set b, reads it, deletes it on the server and returns
// what it read. With terminating, the read comes after the delete, while
// a finalizer that prepare set holds the object; the finalizers are then
// released. Either way the object is gone when storedCopy returns.
func storedCopy(ctx context.Context, t *testing.T, cms corev1client.ConfigMapInterface, name string, terminating bool, prepare func(*corev1.ConfigMap)) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "copy"}}, Data: map[string]string{"a": "1"}}
	if prepare != nil {
		prepare(cm)
	}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, name, types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"x":"1","y":"1"}}`),
		metav1.PatchOptions{FieldManager: "applier"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"b":"1"}}`), metav1.PatchOptions{FieldManager: "updater"}); err != nil {
		t.Fatal(err)
	}
	read := func() *corev1.ConfigMap {
		stored, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	var stored *corev1.ConfigMap
	if !terminating {
		stored = read()
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if terminating {
		stored = read()
	}
	releaseFinalizers(ctx, t, cms, name)
	if _, err := cms.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("%s is still there after its delete: %v", name, err)
	}
	return stored
}

// releaseFinalizers removes the finalizers of the ConfigMap name, if it
// still exists.
func releaseFinalizers(ctx context.Context, t *testing.T, cms corev1client.ConfigMapInterface, name string) {
	t.Helper()
	_, err := cms.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// managers returns the sorted names of obj's field managers.
func managers(obj metav1.Object) []string {
	var names []string
	for _, m := range obj.GetManagedFields() {
		names = append(names, m.Manager)
	}
	slices.Sort(names)
	return names
}

// owns reports whether manager owns the ConfigMap field data.key of cm.
func owns(cm *corev1.ConfigMap, manager, key string) bool {
	for _, m := range cm.ManagedFields {
		if m.Manager != manager || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]json.RawMessage
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields["f:data"]["f:"+key]; ok {
				return true
			}
		}
	}
	return false
}

// fieldOwners lists cm's managers and the fields each owns.
func fieldOwners(cm *corev1.ConfigMap) string {
	var parts []string
	for _, m := range cm.ManagedFields {
		raw := ""
		if m.FieldsV1 != nil {
			raw = m.FieldsV1.GetRawString()
		}
		parts = append(parts, m.Manager+" "+raw)
	}
	return strings.Join(parts, "; ")
}
