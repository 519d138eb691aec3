package main

import (
	"strings"
	"testing"
)

// fastStats returns a benchstat table where every side-by-side benchmark is
// 10% faster than its base, significantly, over 10 rounds.
func fastStats() map[string]map[string]row {
	t := map[string]row{}
	for _, name := range sideBySide {
		t[name] = row{base: 10e-9, ours: 9e-9, delta: "-10.00%", p: "p=0.000 n=10"}
	}
	return map[string]map[string]row{"sec/op": t}
}

func noAllocs() map[string][]float64 {
	a := map[string][]float64{}
	for _, key := range successPath {
		a[key] = []float64{0, 0}
	}
	return a
}

// failed returns the targets of results that failed.
func failed(results []result) []string {
	var out []string
	for _, r := range results {
		if !r.ok {
			out = append(out, r.target+": "+r.measured)
		}
	}
	return out
}

// TestCheck holds the guard to its targets: it passes a run where this
// library is faster or not significantly different and allocates nothing
// on the success path, and fails each way of missing them.
func TestCheck(t *testing.T) {
	t.Parallel()
	if f := failed(check(noAllocs(), fastStats())); len(f) > 0 {
		t.Fatalf("a faster run failed: %v", f)
	}
	for _, tc := range []struct {
		name   string
		change func(map[string][]float64, map[string]map[string]row)
		want   string // in the one failed target
	}{
		{"not significant, slower median", func(_ map[string][]float64, s map[string]map[string]row) {
			s["sec/op"]["RetryAfter"] = row{base: 10e-9, ours: 11e-9, delta: "~", p: "p=0.481 n=10"}
		}, ""},
		{"significantly slower within the noise floor", func(_ map[string][]float64, s map[string]map[string]row) {
			s["sec/op"]["BackoffStep"] = row{base: 10e-9, ours: 10.5e-9, delta: "+5.00%", p: "p=0.002 n=10"}
		}, ""},
		{"significantly slower", func(_ map[string][]float64, s map[string]map[string]row) {
			s["sec/op"]["BackoffStep"] = row{base: 10e-9, ours: 11.5e-9, delta: "+15.00%", p: "p=0.002 n=10"}
		}, "BackoffStep never slower"},
		{"a benchmark beyond the list", func(_ map[string][]float64, s map[string]map[string]row) {
			s["sec/op"]["NewOne"] = row{base: 10e-9, ours: 20e-9, delta: "+100.00%", p: "p=0.000 n=10"}
		}, "NewOne never slower"},
		{"missing", func(_ map[string][]float64, s map[string]map[string]row) {
			delete(s["sec/op"], "ZeroWaitRetries")
		}, "no benchstat row"},
		{"too few rounds", func(_ map[string][]float64, s map[string]map[string]row) {
			s["sec/op"]["OnErrorSuccess"] = row{base: 10e-9, ours: 5e-9, delta: "~", p: "p=0.333 n=3+10"}
		}, "too few to tell"},
		{"an allocation on the success path", func(a map[string][]float64, _ map[string]map[string]row) {
			a[rootKey("OnErrorValueSuccess")] = []float64{0, 1}
		}, "root OnErrorValueSuccess 1"},
		{"a success path not measured", func(a map[string][]float64, _ map[string]map[string]row) {
			delete(a, benchKey("RetryOnConflictSuccess"))
		}, "RetryOnConflictSuccess/impl=kuberetry missing"},
	} {
		allocs, stats := noAllocs(), fastStats()
		tc.change(allocs, stats)
		f := failed(check(allocs, stats))
		switch {
		case tc.want == "" && len(f) > 0:
			t.Errorf("%s: failed %v, want a pass", tc.name, f)
		case tc.want != "" && (len(f) != 1 || !strings.Contains(f[0], tc.want)):
			t.Errorf("%s: failed %v, want one target failed with %q", tc.name, f, tc.want)
		}
	}
}

func TestRounds(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]int{"p=0.002 n=6": 6, "p=0.333 n=2": 2, "p=0.100 n=4+6": 4, "n=10": 10} {
		if got, err := rounds(p); err != nil || got != want {
			t.Errorf("rounds(%q) = %d, %v; want %d", p, got, err, want)
		}
	}
	for _, p := range []string{"", "p=0.1", "n=x"} {
		if _, err := rounds(p); err == nil {
			t.Errorf("rounds(%q): no error", p)
		}
	}
}
