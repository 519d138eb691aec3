package contention

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestMedian checks the statistic the study plots and TestHotObjectBackoff
// compares.
func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(tc.xs)
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("Median changed its argument %v to %v", in, tc.xs)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

// TestPercentile checks the nearest rank: the smallest value with at
// least p% of the values at or below it.
func TestPercentile(t *testing.T) {
	t.Parallel()
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 99, 7},
		{[]time.Duration{7}, 0, 7},
		{ten, 50, 5},
		{ten, 51, 6},
		{ten, 99, 10},
		{ten, 100, 10},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %d) = %v, want %v", tc.sorted, tc.p, got, tc.want)
		}
	}
}
