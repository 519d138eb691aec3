package retry

import (
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// recorder is a Sleeper that records the waits and sleeps for none.
type recorder struct{ waits []time.Duration }

func (r *recorder) Sleep(d time.Duration) { r.waits = append(r.waits, d) }

var errConflict = apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "hot", errors.New("the object has been modified"))

// failing returns an fn that fails with err n times, then succeeds.
func failing(n int, err error) func() error {
	return func() error {
		if n > 0 {
			n--
			return err
		}
		return nil
	}
}

// hotCall runs OnError with HotObjectBackoff (its jitter drawn as 0, so
// each wait is its base), c and fn, and returns the waits.
func hotCall(t *testing.T, b Backoff, c *Contention, fn func() error) []time.Duration {
	t.Helper()
	var r recorder
	err := OnError(b, func(error) bool { return true }, fn,
		WithSleeper(&r), WithRand(func() float64 { return 0 }), WithContention(c))
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsInternalError(err) {
		t.Fatalf("OnError: %v", err)
	}
	return r.waits
}

func equalWaits(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestContentionLearns follows the level through two calls: a retried
// Conflict raises it to 1.5 times the wait before it, a success lowers it
// to 0.75 times, and the next call starts its waits from it.
func TestContentionLearns(t *testing.T) {
	b := HotObjectBackoff
	c := NewContention()
	// Call 1: Conflict, Conflict, success. The first wait is Duration
	// (nothing learned); the Conflict after it raises the level to 1.5 x
	// 5ms = 7.5ms, above the schedule's 6.5ms; the success lowers it.
	waits := hotCall(t, b, c, failing(2, errConflict))
	if want := []time.Duration{5 * time.Millisecond, 7500 * time.Microsecond}; !equalWaits(waits, want) {
		t.Errorf("call 1 waited %v, want %v", waits, want)
	}
	if want := 5625 * time.Microsecond; c.level != want {
		t.Errorf("after call 1 the level is %v, want %v", c.level, want)
	}
	// Call 2 starts from the level, not from Duration.
	waits = hotCall(t, b, c, failing(1, errConflict))
	if want := []time.Duration{5625 * time.Microsecond}; !equalWaits(waits, want) {
		t.Errorf("call 2 waited %v, want %v", waits, want)
	}
}

// TestContentionFirstAttempt checks that a first attempt's Conflict
// teaches nothing, and that its success lowers the level.
func TestContentionFirstAttempt(t *testing.T) {
	c := NewContention()
	hotCall(t, HotObjectBackoff.WithMaxRetries(0), c, failing(1, errConflict))
	if c.level != 0 {
		t.Errorf("a first attempt's Conflict set the level to %v, want nothing learned", c.level)
	}
	c.level = 100 * time.Millisecond
	hotCall(t, HotObjectBackoff, c, failing(0, nil))
	if want := 75 * time.Millisecond; c.level != want {
		t.Errorf("a first attempt's success left the level at %v, want %v", c.level, want)
	}
}

// TestContentionOtherErrors checks that a retried error that is not a
// Conflict (a server's 500) teaches nothing.
func TestContentionOtherErrors(t *testing.T) {
	c := NewContention()
	waits := hotCall(t, HotObjectBackoff.WithMaxRetries(3), c, failing(5, apierrors.NewInternalError(errors.New("boom"))))
	if len(waits) != 3 || c.level != 0 {
		t.Errorf("3 retried 500s: waited %v, level %v; want 3 waits and nothing learned", waits, c.level)
	}
}

// TestContentionBounds checks that the level stays within the Backoff's
// Duration and its Cap (2s without one), however many Conflicts or
// successes it sees: it forgets down to Duration.
func TestContentionBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		b      Backoff
		lo, hi time.Duration
	}{
		{"HotObjectBackoff", HotObjectBackoff, HotObjectBackoff.Duration, contentionCeiling},
		{"Cap 100ms", Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1, Cap: 100 * time.Millisecond}, 10 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewContention()
			for range 10 {
				hotCall(t, tc.b.WithMaxRetries(5), c, failing(100, errConflict))
			}
			if c.level != tc.hi {
				t.Errorf("after 50 retried Conflicts the level is %v, want the bound %v", c.level, tc.hi)
			}
			waits := hotCall(t, tc.b.WithMaxRetries(1), c, failing(100, errConflict))
			if len(waits) != 1 || waits[0] != tc.hi {
				t.Errorf("at the bound, waited %v, want [%v]", waits, tc.hi)
			}
			for range 100 {
				hotCall(t, tc.b, c, failing(0, nil))
			}
			if c.level != tc.lo {
				t.Errorf("after 100 successes the level is %v, want Duration %v", c.level, tc.lo)
			}
		})
	}
}

// TestContentionNil checks that WithContention(nil) learns nothing: the
// waits are the Backoff's own, as without the option.
func TestContentionNil(t *testing.T) {
	var r recorder
	if err := OnError(HotObjectBackoff.WithMaxRetries(3), func(error) bool { return true }, failing(5, errConflict),
		WithSleeper(&r), WithRand(func() float64 { return 0 }), WithContention(nil)); !apierrors.IsConflict(err) {
		t.Fatalf("OnError: %v, want the last Conflict", err)
	}
	want := []time.Duration{5 * time.Millisecond, 6500 * time.Microsecond, 8450 * time.Microsecond}
	if !equalWaits(r.waits, want) {
		t.Errorf("waited %v, want HotObjectBackoff's own %v", r.waits, want)
	}
}

// TestContentionConcurrent shares one Contention between goroutines
// (go test -race checks the lock); the level ends within its bounds.
func TestContentionConcurrent(t *testing.T) {
	c := NewContention()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				var r recorder
				_ = OnError(HotObjectBackoff.WithMaxRetries(3), func(error) bool { return true }, failing((g+i)%5, errConflict),
					WithSleeper(&r), WithContention(c))
			}
		}()
	}
	wg.Wait()
	if lo, hi := bounds(&HotObjectBackoff); c.level < lo || c.level > hi {
		t.Errorf("level %v, want within [%v, %v]", c.level, lo, hi)
	}
}

// TestContentionAllocs checks that learning allocates nothing: a loop
// that succeeds at once, and one that retries a Conflict.
func TestContentionAllocs(t *testing.T) {
	c := NewContention()
	var r recorder
	r.waits = make([]time.Duration, 0, 1)
	ok := func() error { return nil }
	conflictOnce := false
	fn := func() error {
		conflictOnce = !conflictOnce
		if conflictOnce {
			return errConflict
		}
		return nil
	}
	retriable := func(error) bool { return true }
	opts := []Option{WithSleeper(&r), WithContention(c)}
	if n := testing.AllocsPerRun(100, func() { _ = OnError(HotObjectBackoff, retriable, ok, opts...) }); n != 0 {
		t.Errorf("a success with a Contention: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		r.waits = r.waits[:0]
		_ = OnError(HotObjectBackoff, retriable, fn, opts...)
	}); n != 0 {
		t.Errorf("a retried Conflict with a Contention: %v allocations, want 0", n)
	}
}
