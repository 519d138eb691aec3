package outage

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestIntegrity checks that each kind of damage to the written data is
// found, and that a write that landed although its call failed is not.
func TestIntegrity(t *testing.T) {
	t.Parallel()
	calls := []Call{
		{Worker: 0, Seq: 0},
		{Worker: 0, Seq: 1, Err: errors.New("reset")}, // landed, answer lost
		{Worker: 0, Seq: 2, Err: errors.New("reset")}, // never landed
	}
	good := map[string]string{countKey: "2", "c00000": "0", "c00001": "1"}
	tests := []struct {
		name string
		data map[string]string
		want string // a substring of the one problem; "" for none
	}{
		{"intact", good, ""},
		{"lost", map[string]string{countKey: "1", "c00001": "1"}, "lost write"},
		{"applied twice", map[string]string{countKey: "3", "c00000": "0", "c00001": "1"}, "applied twice"},
		{"written by no call", map[string]string{countKey: "3", "c00000": "0", "c00001": "1", "c00007": "7"}, "by no call"},
		{"another value", map[string]string{countKey: "2", "c00000": "5", "c00001": "1"}, "by no call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Result{Sched: Schedule{Workers: 1}, Calls: calls, Data: []map[string]string{tt.data}}
			got := r.Integrity()
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("Integrity: %v, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("Integrity: %v, want one problem about %q", got, tt.want)
			}
		})
	}
	r := &Result{Sched: Schedule{Workers: 1}, Calls: calls, Data: []map[string]string{good}}
	if lost, ok := r.Landed(); lost != 1 || ok != 1 {
		t.Errorf("Landed: %d lost answers, %d succeeded; want 1, 1", lost, ok)
	}
}

// TestNextCalls checks the recovery figures: a worker's next call is the
// first that returned after the outage, and it is back with the first
// that returned nil.
func TestNextCalls(t *testing.T) {
	t.Parallel()
	s := time.Second
	r := &Result{Sched: Schedule{Workers: 2}}
	r.Bounds[After] = 10 * s
	r.Calls = []Call{
		{Worker: 0, Seq: 0, End: 9 * s, Err: errors.New("reset")},
		{Worker: 0, Seq: 1, End: 10*s + 200*time.Millisecond, Err: errors.New("refused")},
		{Worker: 0, Seq: 2, End: 10*s + 700*time.Millisecond},
		{Worker: 1, Seq: 0, End: 10*s + 100*time.Millisecond},
	}
	next, ok := r.NextCalls()
	if !ok[0] || next[0].Seq != 1 || !ok[1] || next[1].Seq != 0 {
		t.Errorf("NextCalls: %+v %v; want worker 0's call 1, worker 1's call 0", next, ok)
	}
	if d, ok := r.Recovery(); !ok || d != 700*time.Millisecond {
		t.Errorf("Recovery: %v %v, want 700ms", d, ok)
	}
	r.Calls = r.Calls[:2]
	if _, ok := r.Recovery(); ok {
		t.Error("Recovery with a worker never back: ok")
	}
}

// TestBaseline checks that a run is measured against the run without a
// budget of its own caller and number of workers: a fleet's controller of
// 4 workers against one of 4, not the controller of 16 beside it.
func TestBaseline(t *testing.T) {
	t.Parallel()
	run := func(c Caller, policy string, workers int) *Result {
		return &Result{Caller: c, Policy: policy, Sched: Schedule{Workers: workers}}
	}
	none16, none4, noneB4 := run(LoopQueue, NoBudget.Name, 16), run(LoopQueue, NoBudget.Name, 4), run(Plain, NoBudget.Name, 4)
	ours4, ours8 := run(LoopQueue, Ours.Name, 4), run(LoopQueue, Ours.Name, 8)
	rs := []*Result{none16, noneB4, none4, ours4, ours8}
	if got := Baseline(rs, ours4); got != none4 {
		t.Errorf("Baseline of a 4-worker run: %+v, want the 4-worker run of its caller without a budget", got)
	}
	if got := Baseline(rs, ours8); got != nil {
		t.Errorf("Baseline of an 8-worker run with none beside it: %+v, want nil", got)
	}
	if got := Ratio(rs, ours8); got != 0 {
		t.Errorf("Ratio without a baseline: %v, want 0", got)
	}
}

// TestFirstCall checks the spread of the workers' first calls: evenly over
// Spread, the last before its end; all at once without one.
func TestFirstCall(t *testing.T) {
	t.Parallel()
	s := Schedule{Spread: 500 * time.Millisecond}
	for _, c := range []struct {
		i, n int
		want time.Duration
	}{{0, 192, 0}, {96, 192, 250 * time.Millisecond}, {191, 192, 497395833 * time.Nanosecond}, {1, 2, 250 * time.Millisecond}} {
		if got := s.firstCall(c.i, c.n); got != c.want {
			t.Errorf("firstCall(%d, %d) over %v = %v, want %v", c.i, c.n, s.Spread, got, c.want)
		}
	}
	if got := (Schedule{}).firstCall(191, 192); got != 0 {
		t.Errorf("firstCall without a spread = %v, want 0", got)
	}
}
