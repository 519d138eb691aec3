package retry

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// HoldEvent describes one scope's hold: its start, or its end. See
// [Budget].OnHold and [Budget.Held].
type HoldEvent struct {
	// Scope is the scope as the budget's errors name it ("writes of
	// secrets", "https://HOST:PORT"); "" for a Budget not on the wire.
	Scope string
	// Ended is false when the hold started (or, from Held, is on), true
	// when it ended.
	Ended bool
	// Since is when the hold started, on the Budget's Clock.
	Since time.Time
	// Err is the failure that started the hold (a refused retry's: the
	// failure it followed); for an HTTP answer, an error naming its status
	// ("retry: the server answered 503 Service Unavailable").
	Err error
	// Probes counts the probes sent during this hold so far.
	Probes int
	// Waited counts the first attempts that waited for this hold so far.
	Waited int
}

// Held returns a HoldEvent for each scope held now (Ended false), oldest
// first (by Since), or nil when none is. A hold is listed from the start
// of its [Budget].OnHold start call until its end call begins. It is safe
// for concurrent use, also from OnHold; it allocates only when a scope is
// held. A nil *Budget holds nothing. See docs/budget.md.
func (b *Budget) Held() []HoldEvent {
	if b == nil {
		return nil
	}
	return b.holds.heldEvents()
}

// heldEvents returns the events of the holds shown, oldest first.
func (t *holdTable) heldEvents() []HoldEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.shown) == 0 {
		return nil
	}
	events := make([]HoldEvent, len(t.shown))
	for i, h := range t.shown {
		events[i] = h.event(false)
	}
	// shown is in the order the starts were delivered; Since orders them.
	slices.SortStableFunc(events, func(a, b HoldEvent) int { return a.Since.Compare(b.Since) })
	return events
}

// event is h's HoldEvent. Called with the table's lock held.
func (h *scopeHold) event(ended bool) HoldEvent {
	e := HoldEvent{Ended: ended, Since: h.since, Err: h.cause, Probes: h.probes, Waited: h.waited}
	if h.key.kind != loopsScope {
		e.Scope = h.key.String()
	}
	return e
}

// holdChanges lists, in the order the table made them, the holds that one
// call started or ended: at most two scopes per call, each of which may
// end another's hold (a full table) and start its own.
type holdChanges struct {
	n     int
	holds [4]*scopeHold
	ended [4]bool
}

func (c *holdChanges) add(h *scopeHold, ended bool) {
	c.holds[c.n], c.ended[c.n] = h, ended
	c.n++
}

// began records that h's hold started at now after cause. Called with
// mu held, right after h.start.
func (t *holdTable) began(h *scopeHold, now time.Time, cause failure, ch *holdChanges) {
	h.since, h.cause = now, cause.error()
	h.started, h.ended = make(chan struct{}), make(chan struct{})
	h.prev = t.ending[h.key]
	ch.add(h, false)
}

// end ends h's hold, if on, and records it in ch. Called with mu held.
func (t *holdTable) end(h *scopeHold, ch *holdChanges) {
	if !h.on {
		return
	}
	h.end()
	if t.ending == nil {
		t.ending = make(map[scope]*scopeHold)
	}
	t.ending[h.key] = h
	ch.add(h, true)
}

// deliver delivers the events of ch from its i-th on, in order, outside
// the lock: each to onHold (nil: none), after the scope's event before it
// was delivered, so that a scope's events come one at a time, each hold's
// start before its end. A panic in onHold goes on once the remaining
// events are delivered: no scope's events stop.
func (t *holdTable) deliver(onHold func(HoldEvent), ch holdChanges, i int) {
	if i >= ch.n {
		return
	}
	defer t.deliver(onHold, ch, i+1)
	h, ended := ch.holds[i], ch.ended[i]
	if ended {
		<-h.started
	} else if prev := h.prev; prev != nil {
		<-prev.ended
	}
	defer t.delivered(h, ended)
	t.mu.Lock()
	if ended {
		h.shown = false
		if i := slices.Index(t.shown, h); i >= 0 {
			t.shown = slices.Delete(t.shown, i, i+1)
		}
	} else {
		h.prev, h.shown = nil, true
		t.shown = append(t.shown, h)
	}
	e := h.event(ended)
	t.mu.Unlock()
	if onHold != nil {
		onHold(e)
	}
}

// delivered marks h's event delivered (or its OnHold call panicked), so
// that the scope's next event may go.
func (t *holdTable) delivered(h *scopeHold, ended bool) {
	if !ended {
		close(h.started)
		return
	}
	t.mu.Lock()
	if t.ending[h.key] == h {
		delete(t.ending, h.key)
	}
	t.mu.Unlock()
	close(h.ended)
}

// failure is a transient failure, kept as it came until a hold that it
// starts needs it as an error: a request's error, or an HTTP answer's
// status (code 0: none).
type failure struct {
	err    error
	code   int
	status string
}

// error returns the failure as HoldEvent.Err.
func (f failure) error() error {
	if f.code != 0 {
		return &statusError{code: f.code, status: f.status}
	}
	return f.err
}

// answerFailure is the failure of an HTTP answer resp.
func answerFailure(resp *http.Response) failure {
	return failure{code: resp.StatusCode, status: resp.Status}
}

// statusError is the failure of an HTTP answer, for HoldEvent.Err.
type statusError struct {
	code   int
	status string // as net/http gives it: "503 Service Unavailable"; "" to make
}

func (e *statusError) Error() string {
	status := e.status
	if status == "" {
		status = strconv.Itoa(e.code) + " " + http.StatusText(e.code)
	}
	return "retry: the server answered " + status
}
