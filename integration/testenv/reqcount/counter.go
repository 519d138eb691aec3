package reqcount

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Request is one request a [Counter] saw: its verb and resource, when it
// reached the transport, went out and was answered, and how it ended.
type Request struct {
	Key
	// Start is when the request reached the transport; Wrote, when it
	// first went out whole on a connection (zero if it never did);
	// FirstByte, when the first byte of its response came (zero if none
	// did); End, when the round trip returned (zero while in flight).
	Start, Wrote, FirstByte, End time.Time
	// Code is the response's status code, 0 when the round trip failed
	// (or has not ended).
	Code int
	// RetryAfter is the response's Retry-After header.
	RetryAfter string
	// Err is the round trip's error.
	Err error
	// Class is the kind of failure: of the response's Code, or of Err.
	Class Class
}

// Outcome returns how r ended.
func (r Request) Outcome() Outcome {
	return Outcome{Key: r.Key, Code: r.Code, Class: r.Class, Written: !r.Wrote.IsZero()}
}

// Outcome is how a request ended: its verb and resource, the status code
// of its response (0 when none came back), its Class, and whether it had
// gone out whole, so the server may have acted on it whether or not an
// answer came.
type Outcome struct {
	Key
	Code    int
	Class   Class
	Written bool
}

// Outcomes is a number of ended requests per Outcome.
type Outcomes map[Outcome]int

// AnyCode matches every status code in [Outcomes.Status], 0 (no
// response) included.
const AnyCode = -1

// Count returns the requests whose Outcome matches.
func (o Outcomes) Count(match func(Outcome) bool) int {
	n := 0
	for k, v := range o {
		if match(k) {
			n += v
		}
	}
	return n
}

// Status returns the requests of verb to resource that ended with status
// code: 0 for no response, [AnyCode] for any.
func (o Outcomes) Status(verb, resource string, code int) int {
	return o.Count(func(k Outcome) bool {
		return k.Verb == verb && k.Resource == resource && (code == AnyCode || k.Code == code)
	})
}

// Failed returns the requests that ended in one of classes.
func (o Outcomes) Failed(classes ...Class) int {
	return o.Count(func(k Outcome) bool { return slices.Contains(classes, k.Class) })
}

// String lists the requests by verb, resource and status code, sorted,
// e.g. "create configmaps 201: 1, create configmaps 409: 15".
func (o Outcomes) String() string {
	type status struct {
		Key
		code int
	}
	n := map[status]int{}
	for k, v := range o {
		n[status{k.Key, k.Code}] += v
	}
	parts := make([]string, 0, len(n))
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s %s %d: %d", k.Verb, k.Resource, k.code, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// Of returns the requests to resource as "verb code" -> count, every verb
// and code.
func (o Outcomes) Of(resource string) map[string]int {
	out := map[string]int{}
	for k, v := range o {
		if k.Resource == resource {
			out[fmt.Sprintf("%s %d", k.Verb, k.Code)] += v
		}
	}
	return out
}

// Counter records the requests that pass through the transports it
// wraps: it counts them as they are sent (Snapshot) and as they end
// (Outcomes), keeps the first transport error of each Class, shows the
// requests in flight, and keeps every ended request when KeepRequests is
// set. The zero Counter is ready to use and safe for concurrent use; set
// its fields before its first request.
type Counter struct {
	// KeepRequests has the Counter keep every request that ends, for
	// Requests. Off, its memory does not grow with the requests it sees.
	KeepRequests bool
	// OnDone, if set, is called with each request as it ends, before the
	// round trip returns, outside the Counter's lock (it may call the
	// Counter).
	OnDone func(Request)

	mu       sync.Mutex
	sent     Counts
	ended    Outcomes
	firstErr [numClasses]error
	done     []Request
	inFlight map[*Request]struct{}
}

// Config returns a copy of cfg whose clients send every request through
// c, on top of any transport wrapper cfg already has.
func (c *Counter) Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(c.Wrap)
	return cfg
}

// Wrap returns a transport that sends every request through c to rt.
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &transport{c: c, next: rt}
}

// Snapshot returns the requests sent so far, by Key, counted as they
// reached the transport: one in flight, or one that failed on the way,
// counts too.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := Counts{}
	maps.Copy(n, c.sent)
	return n
}

// Outcomes returns the requests that have ended so far, by Outcome.
func (c *Counter) Outcomes() Outcomes {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := Outcomes{}
	maps.Copy(n, c.ended)
	return n
}

// FirstErr returns the first round-trip error of class, nil if none.
func (c *Counter) FirstErr(class Class) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if class < None || class >= numClasses {
		return nil
	}
	return c.firstErr[class]
}

// Requests returns the requests that have ended, in the order they
// ended; nil unless KeepRequests is set.
func (c *Counter) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.done)
}

// InFlight returns the number of requests in flight: sent, and their
// round trips not returned.
func (c *Counter) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inFlight)
}

// Pending returns the requests in flight, as far as they got, in the
// order they were sent.
func (c *Counter) Pending() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := make([]Request, 0, len(c.inFlight))
	for r := range c.inFlight {
		rs = append(rs, *r)
	}
	slices.SortFunc(rs, func(a, b Request) int { return a.Start.Compare(b.Start) })
	return rs
}

// start records r as sent and in flight.
func (c *Counter) start(r *Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent, c.ended, c.inFlight = Counts{}, Outcomes{}, map[*Request]struct{}{}
	}
	c.sent[r.Key]++
	c.inFlight[r] = struct{}{}
}

// mark sets *at, one of r's times, to now, unless it is set or r ended.
func (c *Counter) mark(r *Request, at *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.IsZero() && r.End.IsZero() {
		*at = time.Now()
	}
}

// end records how r's round trip returned, and returns r as it ended.
func (c *Counter) end(r *Request, resp *http.Response, err error) Request {
	end := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r.End, r.Err = end, err
	if err == nil {
		r.Code, r.RetryAfter, r.Class = resp.StatusCode, resp.Header.Get("Retry-After"), codeClass(resp.StatusCode)
	} else {
		r.Class = ErrClass(err)
		if c.firstErr[r.Class] == nil {
			c.firstErr[r.Class] = err
		}
	}
	delete(c.inFlight, r)
	c.ended[r.Outcome()]++
	if c.KeepRequests {
		c.done = append(c.done, *r)
	}
	return *r
}

type transport struct {
	c    *Counter
	next http.RoundTripper
}

// RoundTrip counts req before sending it, so a request that fails on the
// way (a reset connection) counts too: the client did send it. It traces
// when req goes out whole and when its answer starts, which tells a
// request that awaits its response headers.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	r := &Request{Key: Classify(req), Start: time.Now()}
	c.start(r)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				c.mark(r, &r.Wrote)
			}
		},
		GotFirstResponseByte: func() { c.mark(r, &r.FirstByte) },
	}))
	resp, err := t.next.RoundTrip(req)
	ended := c.end(r, resp, err)
	if c.OnDone != nil {
		c.OnDone(ended)
	}
	return resp, err
}
