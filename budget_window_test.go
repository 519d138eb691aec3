package retry

import (
	"testing"
	"time"
)

// TestRetryWindow: the window grants retries up to floor(floor +
// ratio*first attempts), counts an entry until its time plus the window
// (sub-windows shifting a first attempt early and a retry late, never the
// other way), and takes a reading earlier than the latest as the latest.
func TestRetryWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := windowLimits{window: 10 * time.Second, ratio: 0.5, floor: 1}
	var w retryWindow
	for range 4 {
		w.deposit(start, l)
	}
	// floor(1 + 0.5*4) = 3 retries.
	for i := range 3 {
		if !w.withdraw(start, l) {
			t.Fatalf("retry %d refused, want 3 granted", i+1)
		}
	}
	if w.withdraw(start, l) {
		t.Fatal("a 4th retry granted, want the bound of 3")
	}
	if w.withdraw(start.Add(-time.Hour), l) {
		t.Fatal("a reading an hour back granted a retry: it counts as the latest")
	}
	// 9s on, the first attempts (sub-window 0) stop counting: with the 3
	// retries still counted, floor(1 + 0) = 1 is below them.
	if w.withdraw(start.Add(9*time.Second), l) {
		t.Error("a retry granted at 9s, want the first attempts expired early")
	}
	// The retries count until 11s (a sub-window late): at 10.5s none is
	// granted yet, at 11s the floor's one is.
	if w.withdraw(start.Add(10500*time.Millisecond), l) {
		t.Error("a retry granted at 10.5s, want the retries still counted")
	}
	if !w.withdraw(start.Add(11*time.Second), l) {
		t.Error("no retry at 11s, want the floor's")
	}
	deposited, granted, refused := w.counts()
	if deposited != 4 || granted != 4 || refused != 4 {
		t.Errorf("counts %d, %d, %d; want 4 deposited, 4 granted, 4 refused", deposited, granted, refused)
	}
}

// TestRetryWindowHugeJump: a reading too far from the first to number its
// sub-window starts the count afresh, retries dropped only when the jump
// passes 1.1 windows.
func TestRetryWindowHugeJump(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := windowLimits{window: time.Nanosecond, floor: 0, ratio: 1}
	var w retryWindow
	w.deposit(start, l)
	if !w.withdraw(start, l) {
		t.Fatal("the first retry refused")
	}
	far := start.Add(100 * 365 * 24 * time.Hour)
	w.deposit(far, l)
	if !w.withdraw(far, l) {
		t.Error("a retry refused after a jump of a century, want the count afresh")
	}
}
