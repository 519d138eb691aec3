package ctrlretry

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errStale is what attemptClient's Get gives controllerutil for a stale
// re-read: not NotFound, so controllerutil returns it at once, writing
// nothing, and judge turns it back into the error that made the read stale.
var errStale = errors.New("retry: ctrlretry: stale re-read")

// attemptClient is the client that controllerutil's functions are given,
// one per call of CreateOrUpdate or CreateOrPatch: c itself, with its reads
// after the first attempt going to reader and its writes' errors judged.
// It is used by one goroutine, the loop's.
type attemptClient struct {
	client.Client
	reader   client.Reader
	attempts int

	// Set by the attempt's failed write, read by judge.
	retry error // a write's error that another attempt may not meet

	// Set by the last failed write, kept until a read that is not stale.
	last          error  // the last retriable error met
	staleVersion  string // a resourceVersion a fresh read cannot return
	alreadyExists bool   // the last write met AlreadyExists: a fresh read finds the object
}

// start begins an attempt.
func (a *attemptClient) start() {
	a.attempts++
	a.retry = nil
}

// judge returns what the attempt's fn returns to the loop for err,
// controllerutil's error: the error that made a stale read stale, or err.
func (a *attemptClient) judge(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStale):
		a.retry = a.last
		return a.last
	case a.retry != nil && errors.Is(err, a.retry):
		return err
	}
	a.retry = nil // not the failed write's error: something after it failed
	return err
}

// retriable is the loop's predicate: err is the error judge marked as
// worth another attempt.
func (a *attemptClient) retriable(err error) bool {
	return a.retry != nil && errors.Is(err, a.retry)
}

// Get reads through c on the first attempt and through the reader after,
// and answers a stale re-read with errStale.
func (a *attemptClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if a.attempts <= 1 {
		return a.Client.Get(ctx, key, obj, opts...)
	}
	err := a.reader.Get(ctx, key, obj, opts...)
	switch {
	case a.alreadyExists && apierrors.IsNotFound(err):
		return errStale
	case err == nil && a.staleVersion != "" && obj.GetResourceVersion() == a.staleVersion:
		return errStale
	}
	a.alreadyExists, a.staleVersion = false, ""
	return err
}

// Create clears what a create must not carry, as the root module's
// CreateOrUpdate does, and creates obj.
func (a *attemptClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	clearForCreate(obj)
	err := a.Client.Create(ctx, obj, opts...)
	if err != nil && retriableCreate(err) {
		a.failed(err, "", apierrors.IsAlreadyExists(err))
	}
	return err
}

// Update updates obj; a Conflict or NotFound makes the version it was sent
// at stale.
func (a *attemptClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	version := obj.GetResourceVersion()
	err := a.Client.Update(ctx, obj, opts...)
	if err != nil && retriableWrite(err) {
		a.failed(err, version, false)
	}
	return err
}

// Patch patches obj; a NotFound makes the version it was read at stale.
func (a *attemptClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	version := obj.GetResourceVersion()
	err := a.Client.Patch(ctx, obj, patch, opts...)
	a.patched(err, version)
	return err
}

// Status is c's status writer, its patches judged as Patch's.
func (a *attemptClient) Status() client.SubResourceWriter {
	return statusWriter{SubResourceWriter: a.Client.Status(), a: a}
}

// patched records a failed patch: a merge patch carries no
// resourceVersion, so its Conflict is not about the version read, but a
// NotFound is.
func (a *attemptClient) patched(err error, version string) {
	switch {
	case err != nil && apierrors.IsNotFound(err):
		a.failed(err, version, false)
	case err != nil && retriableConflict(err):
		a.failed(err, "", false)
	}
}

// failed records a write's retriable error.
func (a *attemptClient) failed(err error, staleVersion string, alreadyExists bool) {
	a.retry, a.last = err, err
	a.staleVersion, a.alreadyExists = staleVersion, alreadyExists
}

// statusWriter is the status writer of an attemptClient.
type statusWriter struct {
	client.SubResourceWriter
	a *attemptClient
}

// Patch patches obj's status; see attemptClient.Patch.
func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	version := obj.GetResourceVersion()
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	w.a.patched(err, version)
	return err
}
