package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"testing"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestUnstructuredNumbersComparedByValue(t *testing.T) {
	t.Parallel()
	stored := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "ns", "resourceVersion": "7"},
			"spec": map[string]any{
				"replicas": int64(3),
				"template": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "web", "ports": []any{map[string]any{"containerPort": int64(8080)}}},
				}}},
				"big":  int64(1<<53 + 1),
				"args": []any{},
			},
		}}
	}
	// set assigns v itself: SetNestedField refuses Go types JSON has not,
	// such as int, which a caller may still put there.
	set := func(v any, path ...string) func(*unstructured.Unstructured) error {
		return func(u *unstructured.Unstructured) error {
			m := u.Object
			for _, p := range path[:len(path)-1] {
				next, ok := m[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[p] = next
				}
				m = next
			}
			m[path[len(path)-1]] = v
			return nil
		}
	}
	setPort := func(v any) func(*unstructured.Unstructured) error {
		return func(u *unstructured.Unstructured) error {
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
			c.(map[string]any)["ports"].([]any)[0].(map[string]any)["containerPort"] = v
			return nil
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*unstructured.Unstructured) error
		write  bool
	}{
		{"float64 of the stored int64", set(float64(3), "spec", "replicas"), false},
		{"int of the stored int64", set(3, "spec", "replicas"), false},
		{"uint32 of the stored int64", set(uint32(3), "spec", "replicas"), false},
		{"float64 in a list in a map", setPort(float64(8080)), false},
		{"int32 in a list in a map", setPort(int32(8080)), false},
		{"json.Number of the stored int64", set(json.Number("3"), "spec", "replicas"), false},
		{"null for the stored empty list", set([]any(nil), "spec", "args"), true},
		{"null for a stored number", set(nil, "spec", "replicas"), true},
		{"another string", set("apps/v2", "apiVersion"), true},
		{"a bool for a number", set(true, "spec", "replicas"), true},
		{"a new key", set([]any{}, "spec", "template", "spec", "volumes"), true},
		{"another value", set(float64(4), "spec", "replicas"), true},
		{"a fraction", set(3.5, "spec", "replicas"), true},
		{"a float that rounds to the stored int64", set(float64(1<<53), "spec", "big"), true},
		{"a string of the number", set("3", "spec", "replicas"), true},
		{"another port in the list", setPort(float64(8081)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cache := stored()
			snapshot := cache.DeepCopy()
			puts := 0
			update := func(_ context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				puts++
				return u, nil
			}
			get := func(context.Context) (*unstructured.Unstructured, error) { return cache, nil }
			_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, get, tc.mutate, update)
			require.NoError(t, err)
			want := 0
			if tc.write {
				want = 1
			}
			assert.Equal(t, want, puts, "writes sent")
			assert.Equal(t, snapshot, cache, "get's object is not modified")
		})
	}
}

// Limit is a typed object with a Quantity, which equality.Semantic compares
// by value.
type Limit struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Max resource.Quantity
}

func (l *Limit) DeepCopyObject() runtime.Object {
	out := *l
	l.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Max = l.Max.DeepCopy()
	return &out
}

func TestTypedQuantityComparedByValue(t *testing.T) {
	t.Parallel()
	current := &Limit{ObjectMeta: metav1.ObjectMeta{Name: "cpu", ResourceVersion: "1"}, Max: resource.MustParse("1")}
	for _, tc := range []struct {
		value string
		write bool
	}{{"1000m", false}, {"1", false}, {"1001m", true}} {
		puts := 0
		_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, current, nil,
			func(l *Limit) error { l.Max = resource.MustParse(tc.value); return nil },
			func(_ context.Context, l *Limit) (*Limit, error) { puts++; return l, nil })
		require.NoError(t, err)
		assert.Equal(t, tc.write, puts == 1, "%s after 1", tc.value)
	}
}

func TestUnstructuredNoOpIsTheSameJSON(t *testing.T) {
	t.Parallel()
	// The oracle: a write is skipped exactly when the content mutate leaves
	// encodes to the same JSON as the content read. Stored content has the
	// decoder's types; mutate puts in any Go number type, nil maps and
	// slices, and json.Number.
	rng := mrand.New(mrand.NewPCG(3, 4))
	for i := range 5000 {
		stored := map[string]any{"metadata": map[string]any{"name": "x"}, "spec": randStored(rng, 3)}
		want := map[string]any{"metadata": map[string]any{"name": "x"}, "spec": randLike(rng, stored["spec"], 3)}
		puts := 0
		get := func(context.Context) (*unstructured.Unstructured, error) {
			return &unstructured.Unstructured{Object: stored}, nil
		}
		_, err := retry.UpdateOnConflict(context.Background(), retry.DefaultRetry, nil, get,
			func(u *unstructured.Unstructured) error { u.Object["spec"] = want["spec"]; return nil },
			func(_ context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				puts++
				return u, nil
			})
		require.NoError(t, err)
		a, err := json.Marshal(stored)
		require.NoError(t, err)
		b, err := json.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, !bytes.Equal(a, b), puts == 1, "case %d: %s -> %s", i, a, b)
	}
}

// randStored returns random unstructured content as a JSON decoder makes it.
func randStored(rng *mrand.Rand, depth int) any {
	switch k := rng.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return rng.IntN(2) == 0
	case k == 2:
		return []string{"a", "b", ""}[rng.IntN(3)]
	case k == 3:
		return int64(rng.IntN(3) - 1)
	case k == 4:
		return float64(rng.IntN(3)) + 0.5
	case k == 5:
		return int64(1<<53 + rng.IntN(2))
	case k == 6 && depth > 0:
		m := map[string]any{}
		for range rng.IntN(3) {
			m[[]string{"a", "b", "c"}[rng.IntN(3)]] = randStored(rng, depth-1)
		}
		return m
	case k == 7 && depth > 0:
		l := []any{}
		for range rng.IntN(3) {
			l = append(l, randStored(rng, depth-1))
		}
		return l
	}
	return "s"
}

// randLike returns v as a caller might set it again: often the same value
// in another Go type, sometimes a change.
func randLike(rng *mrand.Rand, v any, depth int) any {
	if rng.IntN(6) == 0 {
		return randStored(rng, depth)
	}
	switch x := v.(type) {
	case int64:
		switch rng.IntN(6) {
		case 0:
			return float64(x) // rounds 2^53+1 to 2^53: a change
		case 1:
			return json.Number(strconv.FormatInt(x, 10))
		case 2:
			return int(x)
		case 3:
			if x >= 0 {
				return uint32(x)
			}
			return uint64(math.MaxUint64) // -1 is not MaxUint64
		case 4:
			return int8(x)
		}
		return x
	case float64:
		if rng.IntN(2) == 0 {
			return float32(x)
		}
		return x
	case map[string]any:
		if len(x) == 0 && rng.IntN(3) == 0 {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = randLike(rng, e, depth-1)
		}
		return m
	case []any:
		if len(x) == 0 && rng.IntN(3) == 0 {
			return []any(nil)
		}
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = randLike(rng, e, depth-1)
		}
		return l
	}
	return v
}
