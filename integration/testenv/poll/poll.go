// Package poll waits, bounded, for a condition to hold: the one wait the
// integration tests share, for what they cannot be told of (a cache that
// caught up, a request on the wire, a fault that was met); and Sleep, the
// workloads' pause that a context ends.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond at once and then interval after each call returns
// false, until it returns true, and then returns nil. Once timeout has
// passed or ctx is done, it calls cond a last time, so a condition that
// came true by the bound counts, and if that is false too it returns the
// context's error: context.DeadlineExceeded for the timeout. A timeout of
// 0 or less calls cond once. An interval of 0 or less is an error, and
// cond is not called.
func Until(ctx context.Context, interval, timeout time.Duration, cond func() bool) error {
	if interval <= 0 {
		return fmt.Errorf("poll: interval %v: want more than 0", interval)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Sleep returns after d, or as soon as ctx is done.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
