package retry

import (
	"slices"
	"time"
)

// HoldEvent describes one scope's hold: its start, a reminder that it
// lasts, or its end, as [Budget].OnHold receives it; [Budget.Held] lists
// the holds on as HoldEvents. See docs/budget.md.
type HoldEvent struct {
	// Scope is the scope as the budget's errors name it ("writes of
	// secrets", "https://HOST:PORT"); "" for a Budget not on the wire.
	Scope string
	// Ended is false when the hold started or lasts (a reminder, or from
	// Held), true when it ended.
	Ended bool
	// Since is when the hold started, on the Budget's Clock.
	Since time.Time
	// Err is the failure that started the hold (a refused retry's: the
	// failure it followed); in a reminder and from Held, the latest. For an
	// HTTP answer it is an error naming its status ("retry: the server
	// answered 503 Service Unavailable", a 429's with its Retry-After).
	Err error
	// Probes counts the probes sent during this hold so far.
	Probes int
	// Waited counts the first attempts that waited for this hold so far.
	Waited int
}

// The reminders of a hold: the first remindFirst after its start, then at
// intervals doubling up to remindMax.
const (
	remindFirst = 10 * time.Second
	remindMax   = 2 * time.Minute
)

// eventKind is what a HoldEvent tells of its hold.
type eventKind uint8

const (
	holdStarted  eventKind = iota
	holdReminded           // still on: a reminder, or Held's listing
	holdEnded
)

// holdReport is what a scope's hold keeps for its events: what they tell,
// and where their delivery stands. The holdTable's lock guards it; the
// hold's state machine (scopeHold) neither reads nor writes it.
type holdReport struct {
	since          time.Time     // when the hold started
	cause          error         // the failure that started it
	latest         failure       // the latest failure (Held's and a reminder's Err)
	remindAt       time.Time     // when the next reminder is due
	remindGap      time.Duration // the wait before the one after it
	reminding      chan struct{} // closed once the latest reminder is delivered; nil: none yet
	probes, waited int           // probes sent and first attempts that waited during it
	shown          bool          // listed by Held: its start delivered, its end not yet
	started, ended chan struct{} // closed once the start's, the end's event is delivered
}

// event is the HoldEvent of kind of the hold of scope s that r reports: a
// start's and an end's Err is the failure that started the hold, a
// reminder's the latest. Called with the table's lock held.
func (r *holdReport) event(s scope, kind eventKind) HoldEvent {
	e := HoldEvent{Ended: kind == holdEnded, Since: r.since, Err: r.cause, Probes: r.probes, Waited: r.waited}
	if kind == holdReminded {
		if latest := r.latest.error(); latest != nil {
			e.Err = latest
		}
	}
	if s.kind != loopsScope {
		e.Scope = s.String()
	}
	return e
}

// holdEvents is what a table keeps for its holds' events: the holds
// whose start was delivered and whose end was not (shown, in the order of
// their starts: Held lists them), and per scope the hold whose end is not
// yet delivered, which the scope's next start waits for. The holdTable's
// lock guards it; the delivery methods below are the table's.
type holdEvents struct {
	shown  []*scopeHold
	ending map[scope]*scopeHold
}

// heldEvents returns a HoldEvent for each hold shown, oldest first.
func (t *holdTable) heldEvents() []HoldEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events.shown) == 0 {
		return nil
	}
	events := make([]HoldEvent, len(t.events.shown))
	for i, h := range t.events.shown {
		events[i] = h.report.event(h.key, holdReminded)
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
func (t *holdTable) began(h *scopeHold, now time.Time, cause failure, ch *holdChanges) {
	r := &h.report
	r.since, r.cause, r.latest = now, cause.error(), cause
	r.remindAt, r.remindGap, r.reminding = now.Add(remindFirst), 2*remindFirst, nil
	r.started, r.ended = make(chan struct{}), make(chan struct{})
	var after chan struct{}
	if prev := t.events.ending[h.key]; prev != nil {
		after = prev.report.ended
	}
	ch.add(h, holdStarted, after)
}

// remind records in ch a reminder of h's hold, at now, when one is due
// and the one before it is delivered, and sets when the next is due.
// Called with the table's lock held.
func (t *holdTable) remind(h *scopeHold, now time.Time, ch *holdChanges) {
	r := &h.report
	if !h.on || now.Before(r.remindAt) {
		return
	}
	if prev := r.reminding; prev != nil {
		select {
		case <-prev:
		default:
			return
		}
	}
	r.reminding = make(chan struct{})
	r.remindAt, r.remindGap = now.Add(r.remindGap), min(2*r.remindGap, remindMax)
	ch.add(h, holdReminded, nil)
}

// endHold ends h's hold, if on, and records it in ch. Called with the
// table's lock held.
func (t *holdTable) endHold(h *scopeHold, ch *holdChanges) {
	if !h.on {
		return
	}
	h.end()
	if t.events.ending == nil {
		t.events.ending = make(map[scope]*scopeHold)
	}
	t.events.ending[h.key] = h
	ch.add(h, holdEnded, h.report.reminding)
}

// deliver delivers the events of ch, in order, outside the table's lock;
// see deliverFrom.
func (t *holdTable) deliver(onHold func(HoldEvent), ch holdChanges) {
	t.deliverFrom(onHold, ch, 0)
}

// deliverFrom delivers the events of ch from its i-th on, in order,
// outside the table's lock: each to onHold (nil: none),
// after the scope's event before it was delivered, so that a scope's
// events come one at a time: each hold's start, its reminders, its end. A
// panic in onHold goes on once the remaining events are delivered: no
// scope's events stop.
func (t *holdTable) deliverFrom(onHold func(HoldEvent), ch holdChanges, i int) {
	if i >= ch.n {
		return
	}
	defer t.deliverFrom(onHold, ch, i+1)
	h, kind := ch.holds[i], ch.kinds[i]
	if kind != holdStarted {
		<-h.report.started
	}
	if after := ch.after[i]; after != nil {
		<-after
	}
	defer t.delivered(h, kind)
	t.mu.Lock()
	switch kind {
	case holdStarted:
		h.report.shown = true
		t.events.shown = append(t.events.shown, h)
	case holdEnded:
		h.report.shown = false
		if i := slices.Index(t.events.shown, h); i >= 0 {
			t.events.shown = slices.Delete(t.events.shown, i, i+1)
		}
	}
	e := h.report.event(h.key, kind)
	t.mu.Unlock()
	if onHold != nil {
		onHold(e)
	}
}

// delivered marks h's event of kind delivered (or its OnHold call
// panicked), so that the scope's next event may go.
func (t *holdTable) delivered(h *scopeHold, kind eventKind) {
	switch kind {
	case holdStarted:
		close(h.report.started)
	case holdReminded:
		t.mu.Lock()
		r := h.report.reminding
		t.mu.Unlock()
		close(r)
	case holdEnded:
		t.mu.Lock()
		if t.events.ending[h.key] == h {
			delete(t.events.ending, h.key)
		}
		t.mu.Unlock()
		close(h.report.ended)
	}
}
