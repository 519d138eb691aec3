package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

var errNilPatch = errors.New("retry: patch is nil")

// PatchOnConflict reads an object, changes it and sends what changed as a
// JSON merge patch (RFC 7386) locked to the version read, and does it again
// on a 409 Conflict. It is [UpdateOnConflict] with a patch for the write,
// and every rule of that loop holds (the first attempt on a copy of
// current only when it carries a resourceVersion, else on what get read;
// get afresh after a Conflict, mutate's
// error returned, the no-op check, a renaming mutate refused, options,
// exhaustion, bad input), except the write itself:
//
// When mutate changed the object, patch(ctx, obj, data) is called with obj
// the changed copy and data a merge patch from the object as read (before
// mutate) to obj, which also sets metadata.resourceVersion to the version
// read. The server applies it only to that version and answers a 409
// Conflict otherwise, which is retried with a fresh read, so the patch is
// as safe as an update. It returns patch's object.
//
// The patch carries only what mutate changed: a field mutate removed is a
// null, a list mutate changed is sent whole (a merge patch cannot change
// part of a list), and every other field is left out. So a field that this
// client's Go type does not know (one a newer server added, or an older
// client never had) is kept, where an update of the decoded object would
// drop it; except inside a list that mutate changed. Applying data to the
// object as read gives obj, as the server decodes it: a null member of a
// JSON object counts as absent. A change of metadata.resourceVersion by
// mutate is not sent (the lock is the version read), and an object read
// without a resourceVersion (one without object metadata) gets a patch
// without a lock. When the JSON of obj is that of the object read (mutate
// changed only what JSON does not carry), nothing is sent, as when mutate
// changed nothing.
//
// Both objects are encoded with encoding/json, as client-go's typed
// clients and *unstructured.Unstructured encode them. A nil patch, a nil
// mutate, or a nil get with a current that carries no resourceVersion
// returns an error at once and calls nothing. [Patch] is its form for a client-go typed client.
func PatchOnConflict[T Object](ctx context.Context, backoff Backoff, current T,
	get func(context.Context) (T, error), mutate func(T) error,
	patch func(ctx context.Context, obj T, data []byte) (T, error), opts ...Option) (T, error) {
	if patch == nil {
		var zero T
		return zero, errNilPatch
	}
	w, err := newWriter(current, get, mutate)
	if err != nil {
		var zero T
		return zero, err
	}
	w.patch = patch
	return w.runNoResult(ctx, backoff, opts)
}

// sendPatch sends the merge patch from before to obj, and reports whether
// there was anything to send.
func (w *writer[T]) sendPatch(ctx context.Context, before, obj T) (_ T, sent bool, _ error) {
	var zero T
	data, err := mergePatch(before, obj)
	if err != nil || data == nil {
		return zero, false, err
	}
	patched, err := w.patch(ctx, obj, data)
	return patched, true, err
}

// mergePatch returns the RFC 7386 merge patch from before to after, with
// metadata.resourceVersion set to before's, or nil when their JSON is the
// same.
func mergePatch(before, after runtime.Object) ([]byte, error) {
	from, err := jsonValue(before)
	if err != nil {
		return nil, err
	}
	to, err := jsonValue(after)
	if err != nil {
		return nil, err
	}
	rv := resourceVersionOf(from)
	if md, ok := metadataOf(to); ok && rv != "" {
		md["resourceVersion"] = rv // the lock, whatever mutate set
	}
	diff, changed := mergeDiff(from, to)
	if !changed {
		return nil, nil
	}
	patch, ok := diff.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("retry: a %T does not encode to a JSON object, so no merge patch can change it", after)
	}
	if rv != "" {
		md, ok := patch["metadata"].(map[string]any)
		if !ok {
			if patch["metadata"] != nil {
				return nil, fmt.Errorf("retry: the metadata of a %T does not encode to a JSON object", after)
			}
			md = map[string]any{}
			patch["metadata"] = md
		}
		md["resourceVersion"] = rv
	}
	return json.Marshal(patch)
}

// jsonValue encodes obj as JSON and decodes it into maps, lists and
// json.Numbers (which keep every digit an int64 has).
func jsonValue(obj runtime.Object) (any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("retry: encode a %T as JSON for a merge patch: %w", obj, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("retry: decode the JSON of a %T for a merge patch: %w", obj, err)
	}
	return v, nil
}

// mergeDiff returns the merge patch that turns from into to, and whether
// there is one: for two objects, a null for each member to lacks, the
// difference of each member both have that differs, and each member only
// to has; otherwise to itself (a list, a scalar, or an object where from
// had none, which the patch sets whole).
func mergeDiff(from, to any) (any, bool) {
	f, fok := from.(map[string]any)
	t, tok := to.(map[string]any)
	if !fok || !tok {
		if equalJSON(from, to) {
			return nil, false
		}
		return to, true
	}
	patch := map[string]any{}
	for k := range f {
		if _, ok := t[k]; !ok {
			patch[k] = nil
		}
	}
	for k, tv := range t {
		fv, ok := f[k]
		switch {
		case !ok && tv == nil: // a null where nothing was: the same to a decoder
		case !ok:
			patch[k] = tv
		default:
			if d, changed := mergeDiff(fv, tv); changed {
				patch[k] = d
			}
		}
	}
	return patch, len(patch) > 0
}

// metadataOf returns the metadata object of an object's JSON value.
func metadataOf(v any) (map[string]any, bool) {
	obj, _ := v.(map[string]any)
	md, ok := obj["metadata"].(map[string]any)
	return md, ok
}

// resourceVersionOf returns metadata.resourceVersion of an object's JSON
// value, or "".
func resourceVersionOf(v any) string {
	md, _ := metadataOf(v)
	rv, _ := md["resourceVersion"].(string)
	return rv
}
