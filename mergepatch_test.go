package retry_test

import (
	"context"
	"encoding/json"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// patchOf runs PatchOnConflict from the unstructured content from, mutate
// setting to, and returns the data patch was given (nil when it was not
// called) and the loop's error.
func patchOf(t *testing.T, from, to map[string]any) ([]byte, error) {
	t.Helper()
	var sent []byte
	current := &unstructured.Unstructured{Object: from}
	_, err := retry.PatchOnConflict(context.Background(), retry.DefaultRetry, current, nil,
		func(u *unstructured.Unstructured) error {
			u.Object = runtime.DeepCopyJSON(to)
			return nil
		},
		func(_ context.Context, u *unstructured.Unstructured, data []byte) (*unstructured.Unstructured, error) {
			sent = data
			return u, nil
		})
	return sent, err
}

// decodeJSON decodes data as the server's JSON decoder does, numbers kept
// as written.
func decodeJSON(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "%s", data)
	return v
}

// asJSON is v as encoding/json encodes it and the server decodes it.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return decodeJSON(t, data)
}

// dropNullMembers removes the null members of every JSON object in v
// outside lists, which a decoder into Go types reads as absent; a list is
// kept as it is, since a merge patch sets it whole.
func dropNullMembers(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		if x != nil {
			out[k] = dropNullMembers(x)
		}
	}
	return out
}

func withVersion(obj map[string]any, rv string) map[string]any {
	obj["metadata"] = map[string]any{"name": "jobs", "resourceVersion": rv}
	return obj
}

func TestPatchOnConflictMergePatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		from, to map[string]any
		want     string // the patch, keys sorted
	}{
		{"a field set",
			map[string]any{"spec": map[string]any{"a": int64(1)}},
			map[string]any{"spec": map[string]any{"a": int64(1), "b": "x"}},
			`{"metadata":{"resourceVersion":"7"},"spec":{"b":"x"}}`},
		{"a field changed deep down, its siblings left out",
			map[string]any{"spec": map[string]any{"a": map[string]any{"b": int64(1), "c": true}, "d": "kept"}},
			map[string]any{"spec": map[string]any{"a": map[string]any{"b": int64(2), "c": true}, "d": "kept"}},
			`{"metadata":{"resourceVersion":"7"},"spec":{"a":{"b":2}}}`},
		{"a field removed is a null",
			map[string]any{"spec": map[string]any{"a": int64(1), "b": int64(2)}},
			map[string]any{"spec": map[string]any{"a": int64(1)}},
			`{"metadata":{"resourceVersion":"7"},"spec":{"b":null}}`},
		{"a whole object removed is a null",
			map[string]any{"spec": map[string]any{"a": int64(1)}, "status": map[string]any{"x": "y"}},
			map[string]any{"spec": map[string]any{"a": int64(1)}},
			`{"metadata":{"resourceVersion":"7"},"status":null}`},
		{"a list changed is sent whole",
			map[string]any{"items": []any{"a", "b", "c"}},
			map[string]any{"items": []any{"a", "b", "d"}},
			`{"items":["a","b","d"],"metadata":{"resourceVersion":"7"}}`},
		{"a list of objects changed in one member is sent whole",
			map[string]any{"items": []any{map[string]any{"n": "a", "v": int64(1)}, map[string]any{"n": "b"}}},
			map[string]any{"items": []any{map[string]any{"n": "a", "v": int64(2)}, map[string]any{"n": "b"}}},
			`{"items":[{"n":"a","v":2},{"n":"b"}],"metadata":{"resourceVersion":"7"}}`},
		{"an object where a scalar was",
			map[string]any{"spec": "none"},
			map[string]any{"spec": map[string]any{"a": "b"}},
			`{"metadata":{"resourceVersion":"7"},"spec":{"a":"b"}}`},
		{"a field beside the lock",
			map[string]any{},
			map[string]any{"labels": "not metadata's"},
			`{"labels":"not metadata's","metadata":{"resourceVersion":"7"}}`},
		{"an int64 beyond float64's precision keeps every digit",
			map[string]any{"n": int64(1)},
			map[string]any{"n": int64(math.MaxInt64)},
			`{"metadata":{"resourceVersion":"7"},"n":9223372036854775807}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data, err := patchOf(t, withVersion(tc.from, "7"), withVersion(tc.to, "7"))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(data))
			// And applying it gives the object mutate left.
			assert.Equal(t, asJSON(t, tc.to), mergeApply(asJSON(t, tc.from), decodeJSON(t, data)))
		})
	}
	t.Run("metadata changed", func(t *testing.T) {
		t.Parallel()
		from := withVersion(map[string]any{}, "7")
		to := withVersion(map[string]any{}, "7")
		to["metadata"].(map[string]any)["labels"] = map[string]any{"a": "b"}
		data, err := patchOf(t, from, to)
		require.NoError(t, err)
		assert.JSONEq(t, `{"metadata":{"labels":{"a":"b"},"resourceVersion":"7"}}`, string(data))
	})
}

func TestPatchOnConflictRandomTrees(t *testing.T) {
	t.Parallel()
	// Over random JSON trees and random edits of them: applying the patch
	// to the object as read gives the object mutate left (a null member
	// read as absent, as a decoder into Go types reads it); each member
	// mutate removed is a null; each list mutate changed is in the patch
	// whole; and the patch holds the lock.
	rng := mrand.New(mrand.NewPCG(19, 7386))
	for i := range 2000 {
		from := randObject(rng, 4)
		to := runtime.DeepCopyJSON(from)
		for range 1 + rng.IntN(4) {
			editTree(rng, to, 4)
		}
		rv := strconv.Itoa(i + 1)
		withVersion(from, rv)
		withVersion(to, rv)

		data, err := patchOf(t, from, to)
		require.NoError(t, err)
		want, read := asJSON(t, to), asJSON(t, from)
		if equalModuloNulls(read, want) {
			// The edits cancelled out, or only touched nulls.
			continue
		}
		require.NotNil(t, data, "case %d: a change and no patch", i)
		patch := decodeJSON(t, data)
		got := mergeApply(read, patch)
		require.Equal(t, dropNullMembers(want), dropNullMembers(got), "case %d: from %v\nto %v\npatch %s", i, read, want, data)
		assert.Equal(t, rv, patchVersion(patch), "case %d: the lock", i)
		checkRemovedAndLists(t, read, want, patch, "")
	}
}

// equalModuloNulls reports whether a and b are the same to a decoder into
// Go types.
func equalModuloNulls(a, b any) bool {
	x, _ := json.Marshal(dropNullMembers(a))
	y, _ := json.Marshal(dropNullMembers(b))
	return string(x) == string(y)
}

// checkRemovedAndLists checks the patch p from a to b at path: a member of
// a that b lacks is a null in p, and a list that differs is p's whole.
func checkRemovedAndLists(t *testing.T, a, b, p any, path string) {
	t.Helper()
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	pm, pok := p.(map[string]any)
	if !aok || !bok || !pok {
		if _, isList := b.([]any); isList && !equalModuloNulls(a, b) {
			assert.Equal(t, b, p, "%s: a list changed is sent whole", path)
		}
		return
	}
	for k, av := range am {
		bv, ok := bm[k]
		switch {
		case !ok && av != nil:
			pv, sent := pm[k]
			assert.True(t, sent && pv == nil, "%s.%s: removed, and not a null in the patch (%v)", path, k, pv)
		case ok:
			if pv, sent := pm[k]; sent {
				checkRemovedAndLists(t, av, bv, pv, path+"."+k)
			} else {
				assert.True(t, equalModuloNulls(av, bv), "%s.%s: changed and not in the patch", path, k)
			}
		}
	}
}

// randValue returns a random JSON value of unstructured content, at most
// depth deep.
func randValue(rng *mrand.Rand, depth int) any {
	n := 7
	if depth == 0 {
		n = 5
	}
	switch rng.IntN(n) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return int64(rng.IntN(5)) - 2
	case 3:
		return float64(rng.IntN(9)) / 4
	case 4:
		return []string{"", "a", "b", "<&>", "ü"}[rng.IntN(5)]
	case 5:
		return randObject(rng, depth-1)
	default:
		l := make([]any, rng.IntN(4))
		for i := range l {
			l[i] = randValue(rng, depth-1)
		}
		return l
	}
}

func randObject(rng *mrand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range rng.IntN(5) {
		m[randKey(rng)] = randValue(rng, depth)
	}
	return m
}

func randKey(rng *mrand.Rand) string { return string(rune('a' + rng.IntN(6))) }

// editTree makes one random edit somewhere in the object m: a member set,
// replaced or removed, a list changed, or an edit one level down.
func editTree(rng *mrand.Rand, m map[string]any, depth int) {
	k := randKey(rng)
	switch v := m[k].(type) {
	case map[string]any:
		if depth > 0 && rng.IntN(3) > 0 {
			editTree(rng, v, depth-1)
			return
		}
	case []any:
		if len(v) > 0 && rng.IntN(2) == 0 {
			v[rng.IntN(len(v))] = randValue(rng, depth-1)
			return
		}
	}
	if _, ok := m[k]; ok && rng.IntN(3) == 0 {
		delete(m, k)
		return
	}
	m[k] = randValue(rng, depth)
}
