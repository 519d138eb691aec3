package retry

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

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
