package retry

import (
	"context"
	"io"
	"sync"
	"time"
)

// maxScopes bounds a Budget's table of scopes.
const maxScopes = 512

// holdTable keeps the holds of a Budget's scopes: only the scopes that
// failed since their last success, at most maxScopes of them. Its lock
// guards the table, every scopeHold in it or in events, the probes' ids
// and the counters.
type holdTable struct {
	mu     sync.Mutex
	scopes map[scope]*scopeHold
	lastID uint64 // the latest probe's id; ids are never 0

	events holdEvents

	held, probes, refused uint64 // since the first use
}

// admit lets a first attempt of the given scopes go (second's kind is
// noScope when it has but one). While one of them is held it waits, the
// first held one's hold first, until that hold ends, until it may go as
// that scope's probe (then it returns the probe's id, for observe), or
// until ctx ends. An attempt that cannot wait (a loop whose fn takes no
// context) is refused at once.
func (t *holdTable) admit(ctx context.Context, canWait bool, ts timeSource, timing holdTiming, first, second scope) (probe uint64, err error) {
	waited := false
	var waitedFor *scopeHold
	for {
		t.mu.Lock()
		if len(t.scopes) == 0 { // nothing failing: nothing held
			t.mu.Unlock()
			return 0, nil
		}
		s, h := t.heldOf(first, second)
		if h == nil {
			t.mu.Unlock()
			return 0, nil
		}
		if !canWait {
			t.refused++
			t.mu.Unlock()
			return 0, &heldError{scope: s}
		}
		now := ts.holdClock().Now()
		if h.letProbe(now, t.lastID+1, timing) {
			t.lastID++
			t.probes++
			h.probes++
			id := t.lastID
			t.mu.Unlock()
			return id, nil
		}
		if !waited {
			waited = true
			t.held++
		}
		if waitedFor != h {
			waitedFor = h
			h.waited++
		}
		wake, released := h.wake(), h.released
		t.mu.Unlock()

		timer := ts.holdClock().NewTimer(wake.Sub(now))
		select {
		case <-released:
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return 0, newHeldError(ctx, s)
		}
		timer.Stop()
	}
}

// heldOf returns the first of the scopes that is held, and its hold, or
// a nil hold. Called with mu held.
func (t *holdTable) heldOf(first, second scope) (scope, *scopeHold) {
	for _, s := range [2]scope{first, second} {
		if s.kind == noScope {
			continue
		}
		if h := t.scopes[s]; h != nil && h.on {
			return s, h
		}
	}
	return scope{}, nil
}

// refuseHeld refuses a retry of the given scopes when one of them is
// held: it returns that scope and true, counting the refusal.
func (t *holdTable) refuseHeld(first, second scope) (scope, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.scopes) == 0 {
		return scope{}, false
	}
	s, h := t.heldOf(first, second)
	if h == nil {
		return scope{}, false
	}
	t.refused++
	return s, true
}

// start starts the hold of s at now, after a refused retry that followed
// cause, a transient failure of s. It returns the holds it started or
// ended, whose events are to be delivered.
func (t *holdTable) start(s scope, now time.Time, timing holdTiming, cause failure) (ch holdChanges) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.failing(s, now, timing, &ch)
	h.lastFailure, h.latest = now, cause
	if !h.on {
		h.start(now, timing)
		t.events.began(h, now, cause, &ch)
	}
	h.throttled(cause.at, cause.retryAfter, timing)
	return ch
}

// observation is what an attempt said about one of its scopes (a scope of
// kind noScope is none), and the failure when it failed transiently.
type observation struct {
	scope scope
	out   outcome
	cause failure
}

// observe takes what an attempt said about its scopes: a first attempt
// (first) or a retry, sent as the probe id (0: not a probe). A success
// ends a scope's hold and forgets the scope; a probe that did not succeed
// frees its slot, and doubles the interval when it failed (a reminder may
// then be due); a transient failure counts against the scope, a first
// attempt's may start its hold, and a 429's Retry-After holds the next
// probe back. It returns the events it made, to be delivered.
func (t *holdTable) observe(first bool, probe uint64, ts timeSource, timing holdTiming, obs ...observation) (ch holdChanges) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range obs {
		if o.scope.kind == noScope || len(t.scopes) == 0 && o.out != failedTransiently {
			continue
		}
		h := t.scopes[o.scope]
		switch {
		case o.out == answered:
			if h != nil {
				t.events.end(h, &ch)
				delete(t.scopes, o.scope)
			}
		case o.out == failedTransiently:
			now := ts.holdClock().Now()
			if h == nil {
				h = t.failing(o.scope, now, timing, &ch)
			}
			h.lastFailure, h.latest = now, o.cause
			switch {
			case probe != 0 && h.probe == probe:
				h.probeEnded(probe, true, timing)
				t.events.remind(h, now, &ch)
			case first && !h.on:
				if h.failedFirst(now, timing); h.on {
					t.events.began(h, now, o.cause, &ch)
				}
			}
			h.throttled(o.cause.at, o.cause.retryAfter, timing)
		case h != nil && probe != 0:
			h.probeEnded(probe, false, timing)
		}
	}
	return ch
}

// failing returns s's hold, adding s to the table when it is not in it:
// when the table is full it first forgets the scopes neither held nor
// failed within timing.span, and then, if still full, the one whose last
// failure is the oldest, ending its hold (recorded in ch). Called with mu
// held.
func (t *holdTable) failing(s scope, now time.Time, timing holdTiming, ch *holdChanges) *scopeHold {
	if h := t.scopes[s]; h != nil {
		return h
	}
	if t.scopes == nil {
		t.scopes = make(map[scope]*scopeHold)
	}
	if len(t.scopes) >= maxScopes {
		var oldest scope
		var oldestHold *scopeHold
		for k, h := range t.scopes {
			if !h.on && now.Sub(h.lastFailure) >= timing.span {
				delete(t.scopes, k)
				continue
			}
			if oldestHold == nil || h.lastFailure.Before(oldestHold.lastFailure) {
				oldest, oldestHold = k, h
			}
		}
		if len(t.scopes) >= maxScopes {
			t.events.end(oldestHold, ch)
			delete(t.scopes, oldest)
		}
	}
	h := &scopeHold{key: s.detached()}
	t.scopes[h.key] = h
	return h
}

// probeFailed returns the error of probe id, which failed with err, an
// error of the transport: err named with the scope probed and how long it
// has been held (see probeError), or err when the hold ended meanwhile.
func (t *holdTable) probeFailed(id uint64, first, second scope, ts timeSource, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF { // client-go compares these, not their text
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range [2]scope{first, second} {
		if h := t.scopes[s]; h != nil && h.on && h.lastProbe == id {
			return &probeError{scope: h.key, held: ts.holdClock().Since(h.since), err: err}
		}
	}
	return err
}

// counts returns the first attempts that waited, the probes, and the
// attempts refused because their scope was held, since the first use.
func (t *holdTable) counts() (held, probes, refused uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held, t.probes, t.refused
}

// probePanicked frees the slot of probe id, whose attempt panicked: a
// failed probe of its scope.
func (t *holdTable) probePanicked(id uint64, ts timeSource, timing holdTiming) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.scopes {
		if h.on && h.probe == id {
			h.lastFailure = ts.holdClock().Now()
			h.probeEnded(id, true, timing)
		}
	}
}

// heldEvents returns a HoldEvent for each hold listed, oldest first.
func (t *holdTable) heldEvents() []HoldEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.list()
}

// deliver delivers the events of the holds that ch lists, outside the
// lock; see holdEvents.deliver.
func (t *holdTable) deliver(onHold func(HoldEvent), ch holdChanges) {
	t.events.deliver(&t.mu, onHold, ch, 0)
}
