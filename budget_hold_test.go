package retry

import (
	"testing"
	"time"
)

// TestScopeHoldProbes: probes go Hold after the start, the interval
// doubling after each failed probe up to min(5*Hold, 1s); a probe ended
// by its context leaves the interval; one past its due time counts as
// failed and lets the next go at once.
func TestScopeHoldProbes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timing := newHoldTiming(200*time.Millisecond, fullInterval) // max interval 1s (5 x Hold)
	var h scopeHold
	for i := range holdFailures {
		if h.on {
			t.Fatalf("on after %d failures", i)
		}
		h.failedFirst(start.Add(time.Duration(i)*time.Millisecond), timing)
	}
	if !h.on {
		t.Fatal("3 failures within 10*Hold did not start the hold")
	}
	now := start.Add(2 * time.Millisecond)
	if h.letProbe(now, 1, timing) {
		t.Fatal("a probe at once, want Hold after the start")
	}
	now = now.Add(200 * time.Millisecond)
	if !h.letProbe(now, 1, timing) || h.letProbe(now, 2, timing) {
		t.Fatal("want one probe at a time, at Hold")
	}
	h.probeEnded(1, false, timing) // its context ended it
	if h.interval != 200*time.Millisecond || h.next != now.Add(200*time.Millisecond) {
		t.Errorf("interval %v after an unanswered probe, want 200ms", h.interval)
	}
	wants := []time.Duration{400, 800, 1000, 1000}
	for i, want := range wants {
		now = h.next
		if !h.letProbe(now, uint64(i+2), timing) {
			t.Fatalf("probe %d not let through at %v", i+2, now)
		}
		h.probeEnded(uint64(i+2), true, timing)
		if h.interval != want*time.Millisecond {
			t.Errorf("interval %v after failed probe %d, want %vms", h.interval, i+2, want)
		}
	}
	// A probe past its due time fails, and the next goes at once.
	now = h.next
	h.letProbe(now, 10, timing)
	if !h.letProbe(h.due, 11, timing) || h.probe != 11 {
		t.Error("the probe past its due time kept its slot")
	}
	h.end()
	select {
	case <-h.released:
	default:
		t.Error("end did not release the waiters")
	}
}

// TestScopeHoldFailuresSpan: failures farther apart than 10*Hold start no
// hold.
func TestScopeHoldFailuresSpan(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timing := newHoldTiming(100*time.Millisecond, fullInterval)
	var h scopeHold
	for i := range 5 {
		h.failedFirst(start.Add(time.Duration(i)*500*time.Millisecond), timing)
	}
	if h.on {
		t.Error("failures 500ms apart started a hold with a span of 1s")
	}
}

// TestHoldTimingCap: the probe interval's cap is 5 x Hold or 1s,
// whichever is less, never below Hold.
func TestHoldTimingCap(t *testing.T) {
	t.Parallel()
	for hold, want := range map[time.Duration]time.Duration{
		10 * time.Millisecond:  50 * time.Millisecond,
		100 * time.Millisecond: 500 * time.Millisecond,
		200 * time.Millisecond: time.Second,
		300 * time.Millisecond: time.Second,
		2 * time.Second:        2 * time.Second,
	} {
		if got := newHoldTiming(hold, fullInterval).maxInterval; got != want {
			t.Errorf("Hold %v: the interval's cap is %v, want %v", hold, got, want)
		}
	}
}
