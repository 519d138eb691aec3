// Package objrules holds the rules about API objects that the write loops
// of the root module share: what a create must not carry and which errors
// of a write another attempt, reading the object afresh, may mend.
//
// It is the root module's alone. ctrlretry, a module of its own that a user
// upgrades apart from the root, does not import it (its
// TestNoImportOfTheRootsInternals says so): it calls what the root exports
// (retry.IsApplyConflict) and keeps its own copy of the rest, which its
// objrules_test.go checks against the root's loops through their public
// API. So this package may change in any way in any root release; a change
// of a rule here makes that test fail until ctrlretry's copy follows, and
// the ctrlretry release that carries it says which root release it needs.
// (Sharing the package instead would have tied every released ctrlretry to
// the signatures of an internal package that no version promises to keep,
// and no build of the root alone would see a break.)
package objrules

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClearForCreate clears in obj the fields that a create must not carry:
// resourceVersion (the apiserver refuses a create that carries one),
// uid, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
// selfLink and generation (the server's own), and managedFields (which a
// create keeps, crediting the new object's fields to managers that never
// wrote it). Everything else, ownerReferences, finalizers, labels and
// annotations included, is what the caller wants the object to carry.
func ClearForCreate(obj metav1.Object) {
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	obj.SetGeneration(0)
	obj.SetManagedFields(nil)
}

// IsApplyConflict reports whether err is a Server-Side Apply conflict: the
// API error that apierrors.IsConflict finds (the first APIStatus in err's
// tree) has reason Conflict and a cause of type FieldManagerConflict.
// Sending the same apply again can never succeed.
func IsApplyConflict(err error) bool {
	// err itself first: errors.As, and the variable its pointer makes
	// escape, would cost every attempt of a conflict loop an allocation.
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		var wrapped apierrors.APIStatus
		if !errors.As(err, &wrapped) {
			return false
		}
		status = wrapped
	}
	st := status.Status()
	if st.Reason != metav1.StatusReasonConflict || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// RetriableConflict reports whether err is a Conflict that another
// attempt, reading the object afresh, may not meet: any Conflict but an
// apply conflict.
func RetriableConflict(err error) bool {
	return apierrors.IsConflict(err) && !IsApplyConflict(err)
}

// RetriableCreate reports whether a create's error err may pass on another
// attempt that reads first: AlreadyExists (another writer created the
// object meanwhile; the read finds it), or a retriable Conflict. A create
// carries no resourceVersion, so its Conflict is never the object's own:
// on an HA control plane it is the ResourceQuota admission's race.
func RetriableCreate(err error) bool {
	return apierrors.IsAlreadyExists(err) || RetriableConflict(err)
}

// RetriableWrite reports whether an update's or a patch's error err may
// pass on another attempt that reads first: a retriable Conflict, or, when
// the loop creates a missing object (creates), a NotFound: the object was
// deleted meanwhile, and the next attempt creates it.
func RetriableWrite(err error, creates bool) bool {
	return RetriableConflict(err) || creates && apierrors.IsNotFound(err)
}
