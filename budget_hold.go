package retry

import "time"

// holdFailures is how many first attempts of a scope must fail
// transiently, with no success among them, within 10*Hold to start its
// hold.
const holdFailures = 3

// holdTiming is what a Budget's Hold and Rand say to a scope's hold.
type holdTiming struct {
	hold        time.Duration // the first probe interval
	maxInterval time.Duration // 5*Hold or 1s, whichever is less, never below Hold
	span        time.Duration // 10*Hold, saturated: the failures that start a hold, a scope's memory
	rand        func() float64
}

// draw returns a new draw of t.rand: a value outside [0, 1] is taken as
// the nearest end of it, NaN as 0.
func (t holdTiming) draw() float64 {
	r := t.rand()
	switch {
	case !(r > 0): // NaN too
		return 0
	case r > 1:
		return 1
	}
	return r
}

// jittered returns a probe's wait: d times (1 + r) / 2, r a new draw.
func (t holdTiming) jittered(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 + t.draw()) / 2)
}

// afterRetryAfter returns how long after a 429 the hold's next probe may
// go, for its Retry-After d: d times (1 + r / 2), r a new draw, saturated.
func (t holdTiming) afterRetryAfter(d time.Duration) time.Duration {
	f := float64(d) * (1 + t.draw()/2)
	if f >= float64(maxDuration) {
		return maxDuration
	}
	return time.Duration(f)
}

func newHoldTiming(hold time.Duration, rand func() float64) holdTiming {
	limit := time.Second
	if hold < limit/5 {
		limit = 5 * hold
	}
	span := maxDuration
	if hold <= maxDuration/10 {
		span = 10 * hold
	}
	return holdTiming{hold: hold, maxInterval: max(limit, hold), span: span, rand: rand}
}

// scopeHold is the hold of one scope and the failures that may start it.
// It has no lock: the holdTable that keeps it guards it. See [Budget].Hold
// for its rules.
type scopeHold struct {
	on       bool
	released chan struct{} // closed when the hold ends
	interval time.Duration // the current probe interval
	next     time.Time     // when the next probe may go, while none is in flight
	// notBefore is the floor that a 429's Retry-After set: no probe goes
	// before it.
	notBefore time.Time
	// probe is the id of the probe in flight (0: none), sent at sent; it
	// counts as failed when it has no answer at due.
	probe     uint64
	sent, due time.Time
	lastProbe uint64 // the id of the latest probe let go
	// failed holds the times of the transient failures of first attempts
	// since the last success (failures of them, the newest at
	// failed[(failures-1)%holdFailures]).
	failed      [holdFailures]time.Time
	failures    int
	lastFailure time.Time // the latest failure, a failed probe's included

	key scope // the scope, as the table keeps it

	report holdReport // what its events tell, and their delivery (budget_events.go)
}

// start starts the hold at now, unless it is on.
func (h *scopeHold) start(now time.Time, t holdTiming) {
	if h.on {
		return
	}
	h.on, h.released = true, make(chan struct{})
	h.interval, h.next, h.probe = t.hold, now.Add(t.jittered(t.hold)), 0
	h.notBefore = time.Time{}
}

// end ends the hold, if on, and lets every waiting attempt go.
func (h *scopeHold) end() {
	if h.on {
		h.on, h.probe = false, 0
		close(h.released)
	}
}

// failedFirst counts a transient failure of a first attempt at now, and
// starts the hold when it is the third within t.span with no success
// between.
func (h *scopeHold) failedFirst(now time.Time, t holdTiming) {
	h.failed[h.failures%holdFailures] = now
	h.failures++
	// failed[failures%holdFailures] is now the oldest of the last three.
	if h.failures >= holdFailures && now.Sub(h.failed[h.failures%holdFailures]) < t.span {
		h.start(now, t)
	}
}

// letProbe returns true when a probe may go at now, and marks it in
// flight as id. A probe in flight past its due time counts as failed,
// and the next goes at once, unless a 429's Retry-After holds it back.
func (h *scopeHold) letProbe(now time.Time, id uint64, t holdTiming) bool {
	if h.probe != 0 {
		if now.Before(h.due) {
			return false
		}
		h.probeEnded(h.probe, true, t)
		h.next = now
	}
	if now.Before(h.next) || now.Before(h.notBefore) {
		return false
	}
	h.probe, h.lastProbe, h.sent, h.due = id, id, now, now.Add(h.interval)
	return true
}

// wake returns when a waiting attempt should look again: when the next
// probe may go, or when the one in flight counts as failed.
func (h *scopeHold) wake() time.Time {
	if h.probe != 0 {
		return h.due
	}
	if h.next.Before(h.notBefore) {
		return h.notBefore
	}
	return h.next
}

// throttled takes a 429 of the hold's scope that asked, at at, for
// Retry-After d: while the hold lasts, no probe goes before d x (1 + r/2)
// after it.
func (h *scopeHold) throttled(at time.Time, d time.Duration, t holdTiming) {
	if !h.on || d <= 0 {
		return
	}
	if floor := at.Add(t.afterRetryAfter(d)); floor.After(h.notBefore) {
		h.notBefore = floor
	}
}

// probeEnded frees the slot of probe id, unless another probe took it
// since; the next probe may go a jittered interval after id was sent (see
// holdTiming.jittered), the interval doubled (up to t.maxInterval) when
// the probe failed. A probe that its
// own context or a Budget ended said nothing about the scope, and leaves
// the interval as it is.
func (h *scopeHold) probeEnded(id uint64, failed bool, t holdTiming) {
	if !h.on || h.probe != id {
		return
	}
	h.probe = 0
	if failed {
		if h.interval > t.maxInterval/2 {
			h.interval = t.maxInterval
		} else {
			h.interval *= 2
		}
	}
	h.next = h.sent.Add(t.jittered(h.interval))
}
