package retry

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestScopeHoldProbes: probes go Hold after the start, the interval
// doubling after each failed probe up to min(5*Hold, 1s); a probe ended
// by its context leaves the interval; one past its due time counts as
// failed and lets the next go at once.
func TestScopeHoldProbes(t *testing.T) {
	t.Parallel()
	start := holdStart
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
	start := holdStart
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

// fullInterval is a Budget's Rand that makes each probe wait its whole
// interval, the schedule's upper bound, so that tests know when it goes.
func fullInterval() float64 { return 1 }

// holdStart is the fake time the package's own hold and table tests
// start at.
var holdStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// draws returns a Rand that gives rs in turn, then the last one again.
func draws(rs ...float64) func() float64 {
	return func() float64 {
		r := rs[0]
		if len(rs) > 1 {
			rs = rs[1:]
		}
		return r
	}
}

// TestHoldJitteredWaits: each probe's wait, after the hold's start or
// after the previous probe was sent, is the interval times (1 + r) / 2;
// an unanswered probe still counts as failed a whole interval after it
// was sent.
func TestHoldJitteredWaits(t *testing.T) {
	const hold = 100 * time.Millisecond
	timing := newHoldTiming(hold, draws(0, 0.5, 1, 0.2, 0.6))
	var h scopeHold
	h.start(holdStart, timing)
	// interval 100ms, r 0: 50ms; each probe fails at once, the interval
	// doubling to 200ms, 400ms, then 500ms (5 x Hold).
	waits := []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
	now := holdStart
	for i, wait := range waits {
		due := now.Add(wait)
		if h.letProbe(due.Add(-time.Nanosecond), uint64(i+1), timing) {
			t.Fatalf("probe %d went before %v", i+1, wait)
		}
		if got := h.wake(); !got.Equal(due) {
			t.Fatalf("probe %d: wake at %v, want %v", i+1, got.Sub(now), wait)
		}
		if !h.letProbe(due, uint64(i+1), timing) {
			t.Fatalf("probe %d did not go after %v", i+1, wait)
		}
		h.probeEnded(uint64(i+1), true, timing)
		now = due
	}

	// Unanswered: it counts as failed at its whole interval (500ms), and
	// the next goes then.
	timing = newHoldTiming(hold, draws(0))
	h.next = now
	if !h.letProbe(now, 9, timing) {
		t.Fatal("the probe did not go")
	}
	if got := h.wake(); !got.Equal(now.Add(500 * time.Millisecond)) {
		t.Fatalf("the unanswered probe is due at %v, want 500ms", got.Sub(now))
	}
	if h.letProbe(now.Add(499*time.Millisecond), 10, timing) || !h.letProbe(now.Add(500*time.Millisecond), 10, timing) {
		t.Fatal("the next probe must go exactly when the unanswered one counts as failed")
	}
}

// TestHoldDraw: a Rand's number outside [0, 1] is taken as the nearest
// end of it, NaN as 0.
func TestHoldDraw(t *testing.T) {
	for _, tt := range []struct{ r, want float64 }{{-1, 0}, {math.NaN(), 0}, {0.25, 0.25}, {1, 1}, {2, 1}, {math.Inf(1), 1}} {
		if got := newHoldTiming(time.Second, draws(tt.r)).draw(); got != tt.want {
			t.Errorf("Rand %v: draw %v, want %v", tt.r, got, tt.want)
		}
	}
}

// TestHoldRetryAfterFloor: a 429's Retry-After d keeps the hold's next
// probe from going before d x (1 + r/2) after the 429, while the hold
// lasts; a later 429 only raises the floor; a hold that ends forgets it,
// and a 429 of a scope not held sets none.
func TestHoldRetryAfterFloor(t *testing.T) {
	const hold = 100 * time.Millisecond
	timing := newHoldTiming(hold, draws(1, 0.5, 0, 1))
	var h scopeHold
	h.throttled(holdStart, 10*time.Second, timing) // not held: nothing
	h.start(holdStart, timing)                     // next probe at 100ms (r 1)
	if !h.notBefore.IsZero() {
		t.Fatal("a 429 of a scope not held set a floor")
	}
	at := holdStart.Add(10 * time.Millisecond)
	h.throttled(at, 2*time.Second, timing) // r 0.5: 2.5s after the 429
	floor := at.Add(2500 * time.Millisecond)
	if got := h.wake(); !got.Equal(floor) {
		t.Fatalf("wake at %v, want the floor at %v", got.Sub(holdStart), floor.Sub(holdStart))
	}
	if h.letProbe(floor.Add(-time.Nanosecond), 1, timing) {
		t.Fatal("a probe went before the Retry-After floor")
	}
	h.throttled(at, time.Second, timing) // r 0: 1s, below the floor: no change
	if !h.notBefore.Equal(floor) {
		t.Fatalf("a lower Retry-After moved the floor to %v", h.notBefore.Sub(holdStart))
	}
	if !h.letProbe(floor, 1, timing) {
		t.Fatal("the probe did not go at the floor")
	}
	h.end()
	h.start(floor, timing)
	if !h.notBefore.IsZero() {
		t.Fatal("a new hold kept the floor of the one before")
	}
}

// TestHoldsStartingTogetherProbeApart: 1,000 holds of as many budgets,
// each with a Rand of its own, start at the same instant, their server
// down for 3s, each probe failing at once. "Apart" is measured as the
// largest share of the holds whose k-th probe goes within one window of
// Hold/10 (10ms), and the same for the probes that find the server back:
// without jitter (Rand 1) it is 100% each time; with it, at most 25% for
// the first probe (its waits spread over half an interval, 50ms) and at
// most 10% from the third on and for the release.
func TestHoldsStartingTogetherProbeApart(t *testing.T) {
	const (
		n      = 1000
		hold   = 100 * time.Millisecond
		window = hold / 10
		rounds = 6
	)
	up := holdStart.Add(3 * time.Second)
	run := func(rand func(i int) func() float64) (perRound [rounds]float64, release float64) {
		var sent [rounds][]time.Time
		var back []time.Time
		for i := range n {
			timing := newHoldTiming(hold, rand(i))
			var h scopeHold
			h.start(holdStart, timing)
			for k := 0; ; k++ {
				at := h.wake()
				if !h.letProbe(at, uint64(k+1), timing) {
					t.Fatalf("hold %d: probe %d did not go at its wake time", i, k+1)
				}
				if k < rounds {
					sent[k] = append(sent[k], at)
				}
				if !at.Before(up) {
					back = append(back, at)
					break
				}
				h.probeEnded(uint64(k+1), true, timing)
			}
		}
		for k := range sent {
			perRound[k] = crowded(sent[k], window)
		}
		return perRound, crowded(back, window)
	}

	together, togetherBack := run(func(int) func() float64 { return fullInterval })
	for k, share := range together {
		if share != 1 {
			t.Fatalf("without jitter, probe %d: %.0f%% in one window, want 100%%", k+1, 100*share)
		}
	}
	if togetherBack != 1 {
		t.Fatalf("without jitter, %.0f%% came back in one window, want 100%%", 100*togetherBack)
	}

	apart, apartBack := run(func(i int) func() float64 { return rand.New(rand.NewPCG(uint64(i), 37)).Float64 })
	t.Logf("largest share within %v, by probe: %.3f; of the release: %.3f", window, apart, apartBack)
	for k, share := range apart {
		limit := 0.10
		if k < 2 {
			limit = 0.25
		}
		if share > limit {
			t.Errorf("probe %d: %.0f%% of the holds within %v, want at most %.0f%%", k+1, 100*share, window, 100*limit)
		}
	}
	if apartBack > 0.10 {
		t.Errorf("release: %.0f%% of the holds back within %v, want at most 10%%", 100*apartBack, window)
	}
}

// crowded returns the largest share of ts within any window of width w
// that starts at one of them.
func crowded(ts []time.Time, w time.Duration) float64 {
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, time.Time.Compare)
	most, j := 0, 0
	for i := range sorted {
		for sorted[i].Sub(sorted[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return float64(most) / float64(len(ts))
}
