package main

import (
	"net/http"
	"sync"
	"time"
)

// bucket is the timeline's resolution: requests are counted per bucket.
const bucket = 100 * time.Millisecond

// wire records each request that reaches it, below the budget (a request
// the budget holds is recorded when it is let go; one it refuses never
// is): when, and what it was (classify's name for it).
type wire struct {
	classify func(*http.Request) string

	mu   sync.Mutex
	sent []sent
}

type sent struct {
	at   time.Time
	what string
}

// wrap is the recorder as a rest.Config wrapper: the transport below it
// is the connection's.
func (w *wire) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		w.mu.Lock()
		w.sent = append(w.sent, sent{at: time.Now(), what: w.classify(req)})
		w.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// counts returns the requests of each kind (what) sent in each bucket
// from start: counts[what][i] is those sent in [start+i*bucket,
// start+(i+1)*bucket), for n buckets.
func (w *wire) counts(start time.Time, n int) map[string][]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]int{}
	for _, s := range w.sent {
		d := s.at.Sub(start)
		if d < 0 {
			continue
		}
		i := int(d / bucket)
		if i >= n {
			continue
		}
		if out[s.what] == nil {
			out[s.what] = make([]int, n)
		}
		out[s.what][i]++
	}
	return out
}

// between counts the requests of kind what sent in [from, to).
func (w *wire) between(what string, from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sent {
		if s.what == what && !s.at.Before(from) && s.at.Before(to) {
			n++
		}
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// hold is one scope's hold, as the budget reported it.
type hold struct {
	Scope      string
	Start, End time.Time // End is zero while the hold lasts
	Err        string    // the failure that started it
	Probes     int       // probes sent during the hold
	Waited     int       // first attempts that waited for it
}

// holdLog keeps a controller's holds in the order they started.
type holdLog struct {
	mu    sync.Mutex
	holds []hold
}

// started records the start of scope's hold at now.
func (l *holdLog) started(scope string, now time.Time, err string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds = append(l.holds, hold{Scope: scope, Start: now, Err: err})
}

// ended records the end of scope's latest hold at now.
func (l *holdLog) ended(scope string, now time.Time, probes, waited int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.holds) - 1; i >= 0; i-- {
		if h := &l.holds[i]; h.Scope == scope && h.End.IsZero() {
			h.End, h.Probes, h.Waited = now, probes, waited
			return
		}
	}
}

// all returns a copy of the holds.
func (l *holdLog) all() []hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hold(nil), l.holds...)
}

// calls records when each worker's calls returned, and whether they
// succeeded.
type calls struct {
	mu   sync.Mutex
	done []call
}

type call struct {
	worker int
	what   string // the worker's kind: the objects it writes
	end    time.Time
	ok     bool
}

func (c *calls) add(worker int, what string, end time.Time, ok bool) {
	c.mu.Lock()
	c.done = append(c.done, call{worker: worker, what: what, end: end, ok: ok})
	c.mu.Unlock()
}

// back returns how long after at the last of the workers of kind what
// had a call succeed (each worker's first success at or after at), and
// false when one of them had none.
func (c *calls) back(what string, at time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := map[int]time.Time{}
	workers := map[int]bool{}
	for _, k := range c.done {
		if k.what != what {
			continue
		}
		workers[k.worker] = true
		if k.ok && !k.end.Before(at) {
			if t, seen := first[k.worker]; !seen || k.end.Before(t) {
				first[k.worker] = k.end
			}
		}
	}
	var last time.Duration
	for w := range workers {
		t, ok := first[w]
		if !ok {
			return 0, false
		}
		last = max(last, t.Sub(at))
	}
	return last, len(workers) > 0
}

// succeeded counts the calls of workers of kind what that succeeded,
// returning in [from, to).
func (c *calls) succeeded(what string, from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.done {
		if k.what == what && k.ok && !k.end.Before(from) && k.end.Before(to) {
			n++
		}
	}
	return n
}
