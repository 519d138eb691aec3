package ctrlretry

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kuberetry/retry"
)

// The rules about API objects that ctrlretry's attempts follow: what a
// create must not carry, and which errors of a write another attempt,
// reading the object afresh, may mend. They are the root module's rules
// (its internal/objrules, which its own write loops use), kept here rather
// than imported: this module and the root are versioned apart, and a user
// may upgrade either alone, so ctrlretry uses the root module through its
// public API only, whose compatibility its versions promise. Where that
// API has the rule, ctrlretry calls it ([retry.IsApplyConflict]); the rest
// is a field list and three one-line predicates, and objrules_test.go
// checks that they decide as the root's own loops do, through the root's
// public API, at whatever root version the module is built with.

// clearForCreate clears in obj the fields that a create must not carry, as
// the root module's CreateOrUpdate clears its create: resourceVersion,
// uid, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
// selfLink, generation and managedFields. Everything else (ownerReferences,
// finalizers, labels, annotations) is what the caller wants the object to
// carry.
func clearForCreate(obj metav1.Object) {
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	obj.SetGeneration(0)
	obj.SetManagedFields(nil)
}

// retriableConflict reports whether err is a Conflict that another attempt,
// reading the object afresh, may not meet: any Conflict but a Server-Side
// Apply conflict, which the same apply meets again.
func retriableConflict(err error) bool {
	return apierrors.IsConflict(err) && !retry.IsApplyConflict(err)
}

// retriableCreate reports whether a create's error may pass on another
// attempt that reads first: AlreadyExists (another writer created the
// object; the read finds it) or a retriable Conflict (a create carries no
// resourceVersion, so this is the ResourceQuota admission's race).
func retriableCreate(err error) bool {
	return apierrors.IsAlreadyExists(err) || retriableConflict(err)
}

// retriableWrite reports whether an update's or a patch's error may pass on
// another attempt that reads first: a retriable Conflict, or NotFound (the
// object was deleted meanwhile; the next attempt creates it).
func retriableWrite(err error) bool {
	return retriableConflict(err) || apierrors.IsNotFound(err)
}
