package retry

import (
	"time"

	"k8s.io/utils/clock"
)

// Sleeper waits. A loop given one through [WithSleeper] calls Sleep once per
// wait, a zero wait included. k8s.io/utils/clock.RealClock and
// k8s.io/utils/clock/testing.FakeClock satisfy it, so a test passes a
// FakeClock through [WithSleeper] and reads the time slept from it.
type Sleeper interface {
	Sleep(d time.Duration)
}

var _ Sleeper = clock.RealClock{}

// sleep waits d through the loop's sleeper. The default sleeper returns
// early when done is closed; the caller checks ctx afterwards either way.
func (o *options) sleep(done <-chan struct{}, d time.Duration) {
	switch {
	case o.sleeper != nil:
		o.sleeper.Sleep(d)
	case d > 0:
		sleepUntilDone(done, d)
	}
}

// sleepUntilDone is the default sleeper: real time, cut short when done is
// closed (a nil done never is).
func sleepUntilDone(done <-chan struct{}, d time.Duration) {
	if done == nil {
		clock.RealClock{}.Sleep(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
