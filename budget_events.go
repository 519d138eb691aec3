package retry

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// eventKind is what a HoldEvent tells of its hold.
type eventKind uint8

const (
	holdStarted  eventKind = iota
	holdReminded           // still on: a reminder, or Held's listing
	holdEnded
)

// event is h's HoldEvent of the given kind: a start's and an end's Err is
// the failure that started the hold, a reminder's the latest. Called with
// the table's lock held.
func (h *scopeHold) event(kind eventKind) HoldEvent {
	e := HoldEvent{Ended: kind == holdEnded, Since: h.since, Err: h.cause, Probes: h.probes, Waited: h.waited}
	if kind == holdReminded {
		if latest := h.latest.error(); latest != nil {
			e.Err = latest
		}
	}
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
		events[i] = h.event(holdReminded)
	}
	// shown is in the order the starts were delivered; Since orders them.
	slices.SortStableFunc(events, func(a, b HoldEvent) int { return a.Since.Compare(b.Since) })
	return events
}

// holdChanges lists, in the order the table made them, the events that
// one call made: at most two scopes per call, each of which may end
// another's hold (a full table) and start its own, or be reminded of.
// after is the event each waits for (nil: none) besides its hold's start.
type holdChanges struct {
	n     int
	holds [4]*scopeHold
	kinds [4]eventKind
	after [4]chan struct{}
}

func (c *holdChanges) add(h *scopeHold, kind eventKind, after chan struct{}) {
	c.holds[c.n], c.kinds[c.n], c.after[c.n] = h, kind, after
	c.n++
}

// began records in ch that h's hold, just started (h.start), started at
// now after cause. Called with the table's lock held.
func (v *holdEvents) began(h *scopeHold, now time.Time, cause failure, ch *holdChanges) {
	h.since, h.cause, h.latest = now, cause.error(), cause
	h.remindAt, h.remindGap, h.reminding = now.Add(remindFirst), 2*remindFirst, nil
	h.started, h.ended = make(chan struct{}), make(chan struct{})
	var after chan struct{}
	if prev := v.ending[h.key]; prev != nil {
		after = prev.ended
	}
	ch.add(h, holdStarted, after)
}

// remind records in ch a reminder of h's hold, at now, when one is due
// and the one before it is delivered, and sets when the next is due.
// Called with the table's lock held.
func (v *holdEvents) remind(h *scopeHold, now time.Time, ch *holdChanges) {
	if !h.on || now.Before(h.remindAt) {
		return
	}
	if r := h.reminding; r != nil {
		select {
		case <-r:
		default:
			return
		}
	}
	h.reminding = make(chan struct{})
	h.remindAt, h.remindGap = now.Add(h.remindGap), min(2*h.remindGap, remindMax)
	ch.add(h, holdReminded, nil)
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
	ch.add(h, holdEnded, h.reminding)
}

// deliver delivers the events of ch from its i-th on, in order, outside
// mu (the table's lock, which guards v): each to onHold (nil: none),
// after the scope's event before it was delivered, so that a scope's
// events come one at a time: each hold's start, its reminders, its end. A
// panic in onHold goes on once the remaining events are delivered: no
// scope's events stop.
func (v *holdEvents) deliver(mu *sync.Mutex, onHold func(HoldEvent), ch holdChanges, i int) {
	if i >= ch.n {
		return
	}
	defer v.deliver(mu, onHold, ch, i+1)
	h, kind := ch.holds[i], ch.kinds[i]
	if kind != holdStarted {
		<-h.started
	}
	if after := ch.after[i]; after != nil {
		<-after
	}
	defer v.delivered(mu, h, kind)
	mu.Lock()
	switch kind {
	case holdStarted:
		h.shown = true
		v.shown = append(v.shown, h)
	case holdEnded:
		h.shown = false
		if i := slices.Index(v.shown, h); i >= 0 {
			v.shown = slices.Delete(v.shown, i, i+1)
		}
	}
	e := h.event(kind)
	mu.Unlock()
	if onHold != nil {
		onHold(e)
	}
}

// delivered marks h's event of kind delivered (or its OnHold call
// panicked), so that the scope's next event may go.
func (v *holdEvents) delivered(mu *sync.Mutex, h *scopeHold, kind eventKind) {
	switch kind {
	case holdStarted:
		close(h.started)
	case holdReminded:
		mu.Lock()
		r := h.reminding
		mu.Unlock()
		close(r)
	case holdEnded:
		mu.Lock()
		if v.ending[h.key] == h {
			delete(v.ending, h.key)
		}
		mu.Unlock()
		close(h.ended)
	}
}

// failure is a transient failure, kept as it came until a hold that it
// starts needs it as an error: a request's error, or an HTTP answer's
// status (code 0: none); for a 429, the Retry-After it asked for at at (0:
// none).
type failure struct {
	err        error
	code       int
	status     string
	retryAfter time.Duration
	at         time.Time
}

// error returns the failure as HoldEvent.Err: nil for none.
func (f failure) error() error {
	switch {
	case f.code != 0:
		return &statusError{code: f.code, status: f.status, retryAfter: f.retryAfter}
	case f.err != nil && f.retryAfter > 0:
		return &retryAfterError{err: f.err, retryAfter: f.retryAfter}
	}
	return f.err
}

// answerFailure is the failure of an HTTP answer resp, received at now.
func answerFailure(resp *http.Response, now time.Time) failure {
	f := failure{code: resp.StatusCode, status: resp.Status}
	if resp.StatusCode == http.StatusTooManyRequests {
		if d, ok := ResponseRetryAfter(resp, now); ok {
			f.retryAfter, f.at = d, now
		}
	}
	return f
}

// errFailure is the failure of an attempt that returned err at now: a
// 429's keeps the delay that the API error suggests.
func errFailure(err error, now time.Time) failure {
	f := failure{err: err}
	if apierrors.IsTooManyRequests(err) {
		if d, ok := RetryAfter(err); ok {
			f.retryAfter, f.at = d, now
		}
	}
	return f
}

// statusError is the failure of an HTTP answer, for HoldEvent.Err.
type statusError struct {
	code       int
	status     string // as net/http gives it: "503 Service Unavailable"; "" to make
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	status := e.status
	if status == "" {
		status = strconv.Itoa(e.code) + " " + http.StatusText(e.code)
	}
	return "retry: the server answered " + status + retryAfterText(e.retryAfter)
}

// retryAfterError is an attempt's 429 with the Retry-After it asked for,
// for HoldEvent.Err.
type retryAfterError struct {
	err        error
	retryAfter time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() + retryAfterText(e.retryAfter) }

func (e *retryAfterError) Unwrap() error { return e.err }

func retryAfterText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " (Retry-After " + d.String() + ")"
}
