package poll_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry/integration/testenv/poll"
)

func TestUntil(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		timeout  time.Duration
		trueFrom int // the call from which cond holds; 0: never
		want     error
		calls    int // exactly; -1: at least 2
	}{
		{"holds at once", context.Background(), time.Minute, 1, nil, 1},
		{"holds on the third call", context.Background(), time.Minute, 3, nil, 3},
		{"never holds", context.Background(), 5 * time.Millisecond, 0, context.DeadlineExceeded, -1},
		{"zero timeout: one call", context.Background(), 0, 0, context.DeadlineExceeded, 1},
		{"ctx done: one call", canceled, time.Minute, 0, context.Canceled, 1},
		{"ctx done but cond holds", canceled, time.Minute, 1, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := poll.Until(tc.ctx, time.Millisecond, tc.timeout, func() bool {
				calls++
				return tc.trueFrom > 0 && calls >= tc.trueFrom
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Until: %v, want %v", err, tc.want)
			}
			if tc.calls >= 0 && calls != tc.calls || tc.calls < 0 && calls < 2 {
				t.Errorf("cond called %d times, want %d (-1: at least 2)", calls, tc.calls)
			}
		})
	}
}

// TestUntilLastLook checks that cond is called once more after the
// timeout, so that a condition that came true by the bound counts.
func TestUntilLastLook(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Millisecond
	start := time.Now()
	var last time.Time
	err := poll.Until(context.Background(), time.Hour, timeout, func() bool {
		last = time.Now()
		return false
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until: %v, want context.DeadlineExceeded", err)
	}
	if took := last.Sub(start); took < timeout {
		t.Errorf("last call %v after the start, want at least the timeout %v", took, timeout)
	}
}

func TestUntilBadInterval(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{0, -time.Second} {
		called := false
		err := poll.Until(context.Background(), interval, time.Minute, func() bool { called = true; return true })
		if err == nil || !strings.HasPrefix(err.Error(), "poll: interval "+interval.String()) {
			t.Errorf("interval %v: %v, want an error naming the interval", interval, err)
		}
		if called {
			t.Errorf("interval %v: cond was called", interval)
		}
	}
}

// TestSleep checks that Sleep returns once ctx is done, long before d.
func TestSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	poll.Sleep(ctx, time.Hour)
	if took := time.Since(start); took > time.Minute {
		t.Errorf("Sleep with a done context took %v", took)
	}
	start = time.Now()
	poll.Sleep(context.Background(), time.Millisecond)
	if took := time.Since(start); took < time.Millisecond {
		t.Errorf("Sleep(1ms) returned after %v", took)
	}
}
