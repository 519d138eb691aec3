package objrules

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetriable(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	conflict := apierrors.NewConflict(cms, "cm", errors.New("the object has been modified"))
	apply := apierrors.NewConflict(cms, "cm", errors.New("Apply failed with 1 conflict"))
	apply.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict}}
	exists := apierrors.NewAlreadyExists(cms, "cm")
	notFound := apierrors.NewNotFound(cms, "cm")
	for _, tc := range []struct {
		name                          string
		err                           error
		create, write, writeNoCreates bool
	}{
		{"Conflict", conflict, true, true, true},
		{"wrapped Conflict", fmt.Errorf("put: %w", conflict), true, true, true},
		{"apply conflict", apply, false, false, false},
		{"AlreadyExists", exists, true, false, false},
		{"NotFound", notFound, false, true, false},
		{"Forbidden", apierrors.NewForbidden(cms, "cm", errors.New("no")), false, false, false},
		{"not an API error", errors.New("EOF"), false, false, false},
	} {
		if got := RetriableCreate(tc.err); got != tc.create {
			t.Errorf("%s: RetriableCreate = %v", tc.name, got)
		}
		if got := RetriableWrite(tc.err, true); got != tc.write {
			t.Errorf("%s: RetriableWrite(creates) = %v", tc.name, got)
		}
		if got := RetriableWrite(tc.err, false); got != tc.writeNoCreates {
			t.Errorf("%s: RetriableWrite = %v", tc.name, got)
		}
	}
}

func TestClearForCreate(t *testing.T) {
	now := metav1.Now()
	grace := int64(30)
	obj := &metav1.ObjectMeta{
		Name: "cm", Namespace: "ns", ResourceVersion: "7", UID: "u", CreationTimestamp: now,
		DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace, Generation: 3,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		Labels:        map[string]string{"a": "1"}, Finalizers: []string{"f"},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
	}
	obj.SetSelfLink("/x")
	ClearForCreate(obj)
	want := &metav1.ObjectMeta{
		Name: "cm", Namespace: "ns", Labels: map[string]string{"a": "1"}, Finalizers: []string{"f"},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
	}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("cleared to\n%+v\nwant\n%+v", obj, want)
	}
}
