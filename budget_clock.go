package retry

import (
	"time"

	"k8s.io/utils/clock"
)

// timeSource is a Budget's one source of time: its Clock, or real time
// when nil. The hold reads the time and runs its timers on the Clock when
// the Clock can make timers; on real time otherwise, as a Clock that only
// reads the time cannot wake a waiting call.
type timeSource struct{ clock clock.PassiveClock }

// now is the retry window's time.
func (ts timeSource) now() time.Time {
	if ts.clock == nil {
		return time.Now()
	}
	return ts.clock.Now()
}

// holdClock is the hold's time.
func (ts timeSource) holdClock() clock.Clock {
	if c, ok := ts.clock.(clock.Clock); ok {
		return c
	}
	return clock.RealClock{}
}
