package retry

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// HoldEvent describes one scope's hold: its start, or its end, as
// [Budget].OnHold receives it; [Budget.Held] lists the holds on as
// HoldEvents. See docs/budget.md.
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

// event is h's HoldEvent. Called with the table's lock held.
func (h *scopeHold) event(ended bool) HoldEvent {
	e := HoldEvent{Ended: ended, Since: h.since, Err: h.cause, Probes: h.probes, Waited: h.waited}
	if h.key.kind != loopsScope {
		e.Scope = h.key.String()
	}
	return e
}

// holdEvents is what a table keeps for its holds' events: the holds
// whose start was delivered and whose end was not (shown, in the order of
// their starts: Held lists them), and per scope the hold whose end is not
// yet delivered, which the scope's next start waits for. The holdTable's
// lock guards it.
type holdEvents struct {
	shown  []*scopeHold
	ending map[scope]*scopeHold
}

// list returns the events of the holds shown, oldest first. Called with
// the table's lock held.
func (v *holdEvents) list() []HoldEvent {
	if len(v.shown) == 0 {
		return nil
	}
	events := make([]HoldEvent, len(v.shown))
	for i, h := range v.shown {
		events[i] = h.event(false)
	}
	// shown is in the order the starts were delivered; Since orders them.
	slices.SortStableFunc(events, func(a, b HoldEvent) int { return a.Since.Compare(b.Since) })
	return events
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

// began records in ch that h's hold, just started (h.start), started at
// now after cause. Called with the table's lock held.
func (v *holdEvents) began(h *scopeHold, now time.Time, cause failure, ch *holdChanges) {
	h.since, h.cause = now, cause.error()
	h.started, h.ended = make(chan struct{}), make(chan struct{})
	h.prev = v.ending[h.key]
	ch.add(h, false)
}

// end ends h's hold, if on, and records it in ch. Called with the table's
// lock held.
func (v *holdEvents) end(h *scopeHold, ch *holdChanges) {
	if !h.on {
		return
	}
	h.end()
	if v.ending == nil {
		v.ending = make(map[scope]*scopeHold)
	}
	v.ending[h.key] = h
	ch.add(h, true)
}

// deliver delivers the events of ch from its i-th on, in order, outside
// mu (the table's lock, which guards v): each to onHold (nil: none),
// after the scope's event before it was delivered, so that a scope's
// events come one at a time, each hold's start before its end. A panic in
// onHold goes on once the remaining events are delivered: no scope's
// events stop.
func (v *holdEvents) deliver(mu *sync.Mutex, onHold func(HoldEvent), ch holdChanges, i int) {
	if i >= ch.n {
		return
	}
	defer v.deliver(mu, onHold, ch, i+1)
	h, ended := ch.holds[i], ch.ended[i]
	if ended {
		<-h.started
	} else if prev := h.prev; prev != nil {
		<-prev.ended
	}
	defer v.delivered(mu, h, ended)
	mu.Lock()
	if ended {
		h.shown = false
		if i := slices.Index(v.shown, h); i >= 0 {
			v.shown = slices.Delete(v.shown, i, i+1)
		}
	} else {
		h.prev, h.shown = nil, true
		v.shown = append(v.shown, h)
	}
	e := h.event(ended)
	mu.Unlock()
	if onHold != nil {
		onHold(e)
	}
}

// delivered marks h's event delivered (or its OnHold call panicked), so
// that the scope's next event may go.
func (v *holdEvents) delivered(mu *sync.Mutex, h *scopeHold, ended bool) {
	if !ended {
		close(h.started)
		return
	}
	mu.Lock()
	if v.ending[h.key] == h {
		delete(v.ending, h.key)
	}
	mu.Unlock()
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
