package retry

import (
	"encoding/json"
	"math"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// equal is the no-op check: equality.Semantic.DeepEqual, or, for
// unstructured content, a comparison of the JSON values in which numbers
// are equal when their values are.
func equal(before, obj runtime.Object) bool {
	b, ok := before.(runtime.Unstructured)
	if !ok {
		return equality.Semantic.DeepEqual(before, obj)
	}
	o, ok := obj.(runtime.Unstructured)
	if !ok {
		return false
	}
	return equalJSON(b.UnstructuredContent(), o.UnstructuredContent())
}

// equalJSON compares two values of unstructured content at any depth, as
// the JSON they encode to: numbers are equal when their values are, and a
// nil map or slice is null, which differs from an empty one (for a
// custom resource the server may keep either). Values of types JSON has
// not are left to equality.Semantic.
func equalJSON(a, b any) bool {
	if isNull(a) || isNull(b) {
		return isNull(a) && isNull(b)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		return ok && x.equal(y)
	}
	return equality.Semantic.DeepEqual(a, b)
}

// isNull reports whether v encodes to JSON null.
func isNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return x == nil
	case []any:
		return x == nil
	}
	return false
}

// number is a Go numeric value as one of int64, uint64 or float64, so that
// values of different types compare exactly.
type number struct {
	kind numberKind
	i    int64
	u    uint64
	f    float64
}

type numberKind uint8

// The kinds in the order number.equal sorts a pair by.
const (
	float numberKind = iota
	signed
	unsigned
)

func toNumber(v any) (number, bool) {
	switch n := v.(type) {
	case int:
		return number{kind: signed, i: int64(n)}, true
	case int8:
		return number{kind: signed, i: int64(n)}, true
	case int16:
		return number{kind: signed, i: int64(n)}, true
	case int32:
		return number{kind: signed, i: int64(n)}, true
	case int64:
		return number{kind: signed, i: n}, true
	case uint:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint8:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint16:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint32:
		return number{kind: unsigned, u: uint64(n)}, true
	case uint64:
		return number{kind: unsigned, u: n}, true
	case float32:
		return number{kind: float, f: float64(n)}, true
	case float64:
		return number{kind: float, f: n}, true
	case json.Number: // what a decoder set to UseNumber gives
		if i, err := n.Int64(); err == nil {
			return number{kind: signed, i: i}, true
		}
		if f, err := n.Float64(); err == nil {
			return number{kind: float, f: f}, true
		}
	}
	return number{}, false
}

// equal reports whether x and y are the same number, exactly: no float
// rounding makes two different integers equal.
func (x number) equal(y number) bool {
	if x.kind > y.kind {
		x, y = y, x
	}
	switch {
	case x.kind == y.kind:
		return x.i == y.i && x.u == y.u && x.f == y.f
	case x.kind == signed: // y is unsigned
		return x.i >= 0 && uint64(x.i) == y.u
	case y.kind == signed: // x is a float
		const two63 = 1 << 63
		return x.f >= -two63 && x.f < two63 && x.f == math.Trunc(x.f) && int64(x.f) == y.i
	default: // x is a float, y a uint
		const two64 = 1 << 64
		return x.f >= 0 && x.f < two64 && x.f == math.Trunc(x.f) && uint64(x.f) == y.u
	}
}
