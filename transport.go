package retry

import (
	"context"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// WrapTransport returns an http.RoundTripper that charges each request
// through rt to b, for rest.Config.Wrap: cfg.Wrap(budget.WrapTransport).
// Every request of a process then counts, client-go's own resends and an
// informer's lists and watches included, where only loops given
// [WithBudget] count otherwise.
//
// A request is a retry when it follows a transient failure: one that
// client-go sends again itself (a request with the method and URL of one
// whose answer, within the last Window, client-go resends: a 429 or 5xx
// with a numeric Retry-After, or a connection reset or EOF on a GET; an EOF
// or a timeout on a watch), or one made during a later attempt of one of
// this package's loops whose previous attempt failed transiently (the
// loops mark the context they pass to fn). A retry withdraws from b; every
// other request is a first attempt, deposits in b and waits during a hold
// (see [Budget].Hold), as a loop's first attempt does. A response neither
// 429 nor 5xx is a success and ends a hold.
//
// A refused retry never reaches rt: the caller gets an error (inside a
// *url.Error from an http.Client) that matches [ErrBudgetExhausted] and
// nothing client-go reacts to: not a timeout, not a connection reset, not
// an EOF, so client-go returns it at once for every verb and does not turn
// a watch into an empty one. A loop whose attempt returns it returns it at
// once.
//
// A loop given WithBudget(b) charges its own attempts, so the requests made
// with the context it passes to fn (and their resends) pass through
// uncharged. Requests for coordination.k8s.io Leases (leader election)
// pass through too: never refused, never held, never counted, so a
// process keeps its leadership through an outage. A watch is charged when
// it starts; its response's headers are its answer, and the budget does
// not hold it for its lifetime.
//
// The resends are recognized from a fixed table of recent failures, 128
// sets of 4 picked by a hash of the method and URL, so memory does not
// grow with the number of URLs. A failure whose set is full replaces the
// set's oldest, whose resend then counts as a first attempt: with hundreds
// of URLs failing within a Window, some resends do. A granted request
// takes one lock (the budget's; three while failures are remembered) and
// allocates nothing.
//
// A nil rt means http.DefaultTransport. A nil or invalid b gives a
// RoundTripper that sends nothing and returns [Budget.Validate]'s error
// for every request, which client-go does not resend.
func (b *Budget) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if err := b.Validate(); err != nil {
		return &invalidTransport{err: fmt.Errorf("%w; WrapTransport's RoundTripper sends no request", err), rt: rt}
	}
	if b.resends.Load() == nil {
		b.resends.CompareAndSwap(nil, &resendTable{seed: maphash.MakeSeed()})
	}
	budgetsOnWire.Store(true)
	return &budgetTransport{budget: b, rt: rt}
}

type budgetTransport struct {
	budget *Budget
	rt     http.RoundTripper
}

// WrappedRoundTripper returns the RoundTripper under the budget, as
// k8s.io/apimachinery's net.RoundTripperWrapper asks, so that client-go
// finds the transport beneath (to close its idle connections).
func (t *budgetTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// RoundTrip charges req to the budget and sends it, or refuses it.
func (t *budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b := t.budget
	if isLease(req.URL.Path) {
		return t.rt.RoundTrip(req)
	}
	ctx := req.Context()
	mark, _ := ctx.Value(attemptKey{}).(*attemptCtx)
	if mark.chargedBy(b) {
		return t.rt.RoundTrip(req)
	}
	table := b.resends.Load()
	var key uint64 // 0 until needed
	resend := false
	if table.live.Load() > 0 {
		key = table.key(req)
		resend = table.recent(key, b.now(), b.Window)
	}
	retry := resend || mark.afterTransient()
	var probe uint64
	if retry {
		if !b.withdraw(true) {
			if resend {
				table.forget(key)
			}
			closeBody(req)
			return nil, errWireRefused
		}
	} else {
		var err error
		if probe, err = b.admit(ctx, ctx.Done()); err != nil {
			closeBody(req)
			return nil, err
		}
	}

	resp, err := t.send(req, probe)
	out, resends := wireOutcome(req, resp, err)
	switch {
	case resends:
		if key == 0 {
			key = table.key(req)
		}
		table.record(key, b.now())
	case table.live.Load() > 0: // this answer replaces an earlier resent one
		if key == 0 {
			key = table.key(req)
		}
		table.forget(key)
	}
	b.observe(!retry, probe, out)
	return resp, err
}

// send passes req to rt; a probe's slot is freed if rt panics.
func (t *budgetTransport) send(req *http.Request, probe uint64) (*http.Response, error) {
	if probe == 0 {
		return t.rt.RoundTrip(req)
	}
	ended := false
	defer t.budget.guardProbe(probe, &ended)
	resp, err := t.rt.RoundTrip(req)
	ended = true
	return resp, err
}

// wireOutcome judges a round trip: a 429 or 5xx and a transport error are
// transient failures, anything else an answer. resends reports whether
// client-go sends req again itself after it (rest.Request's request and
// Watch, through withRetry.IsNextRetry).
func wireOutcome(req *http.Request, resp *http.Response, err error) (out outcome, resends bool) {
	if err != nil {
		switch {
		case inTree(err, ErrBudgetExhausted):
			return budgetRefused, false
		case req.Context().Err() != nil:
			return unanswered, false
		case req.Method != http.MethodGet:
			return failedTransiently, false
		case isWatch(req.URL):
			return failedTransiently, utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
		}
		return failedTransiently, utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
	}
	if c := resp.StatusCode; c != http.StatusTooManyRequests && c < 500 {
		return answered, false
	}
	// client-go resends a 429 or 5xx whose Retry-After strconv.Atoi reads,
	// unless the request's body is a stream it cannot send twice.
	if streamedBody(req) {
		return failedTransiently, false
	}
	if h := resp.Header.Get("Retry-After"); h != "" {
		_, aerr := strconv.Atoi(h)
		return failedTransiently, aerr == nil
	}
	return failedTransiently, false
}

// streamedBody reports whether req's body cannot be read again: client-go
// resends no request built from an io.Reader (its Body(io.Reader)), and
// net/http sets GetBody for the byte slices client-go otherwise sends.
func streamedBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.GetBody == nil
}

// isLease reports whether path is a coordination.k8s.io Lease's, or their
// collection's.
func isLease(path string) bool {
	_, rest, ok := strings.Cut(path, "/apis/coordination.k8s.io/")
	return ok && strings.Contains(rest, "/leases")
}

// isWatch reports whether u starts a watch: watch=true (or 1) in the
// query, as client-go sends, or the old /watch/ path.
func isWatch(u *url.URL) bool {
	for q := u.RawQuery; q != ""; {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "watch=true" || kv == "watch=1" {
			return true
		}
	}
	return strings.Contains(u.Path, "/watch/")
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// wireRefusal is the error of a request the budget refused. Its message
// holds none of the texts by which client-go's net.IsProbableEOF and
// net.IsConnectionReset recognize a broken connection, and it is no
// timeout, so client-go resends nothing after it.
type wireRefusal struct{}

var errWireRefused error = wireRefusal{}

func (wireRefusal) Error() string {
	return ErrBudgetExhausted.Error() + ": the budget refused this request, a retry, and did not send it"
}

func (wireRefusal) Unwrap() error { return ErrBudgetExhausted }

// invalidTransport is WrapTransport's RoundTripper for a nil or invalid
// Budget: it refuses every request with err.
type invalidTransport struct {
	err error
	rt  http.RoundTripper
}

func (t *invalidTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody(req)
	return nil, t.err
}

// WrappedRoundTripper returns the RoundTripper that was to be wrapped.
func (t *invalidTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// attemptKey is the context key under which a loop marks an attempt.
type attemptKey struct{}

// attemptCtx is the context a loop passes to an attempt's fn when a
// transport needs to know about it: the loop charges a Budget on the wire
// itself, or the attempt follows a transient failure.
type attemptCtx struct {
	context.Context
	budget *Budget     // the loop's own Budget, which charged the attempt; nil if none
	retry  bool        // this attempt, or an enclosing loop's, follows a transient failure
	outer  *attemptCtx // the mark of an enclosing loop's attempt, if any
}

func markAttempt(ctx context.Context, own *Budget, afterTransient bool) context.Context {
	outer, _ := ctx.Value(attemptKey{}).(*attemptCtx)
	return &attemptCtx{Context: ctx, budget: own, retry: afterTransient || outer.afterTransient(), outer: outer}
}

func (c *attemptCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// chargedBy reports whether the loop of this attempt, or of an enclosing
// one, charges b itself.
func (c *attemptCtx) chargedBy(b *Budget) bool {
	for ; c != nil; c = c.outer {
		if c.budget == b {
			return true
		}
	}
	return false
}

func (c *attemptCtx) afterTransient() bool { return c != nil && c.retry }

// resendSets and resendWays shape the resend table: a request's key picks
// a set, whose ways hold the latest keys of that set.
const (
	resendSets = 128
	resendWays = 4
)

// resendTable remembers the requests whose latest answer client-go
// resends, for a Window: a set-associative cache of their keys, of a
// fixed size.
type resendTable struct {
	live   atomic.Int32 // entries held; 0 spares a request the lookups
	seed   maphash.Seed
	mu     sync.Mutex
	newest time.Time // the latest record
	sets   [resendSets][resendWays]resendEntry
}

type resendEntry struct {
	key uint64 // 0: empty
	at  time.Time
}

// key is a hash of req's method and URL, never 0.
func (t *resendTable) key(req *http.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	u := req.URL
	for _, s := range [...]string{req.Method, u.Scheme, u.Host, u.Path, u.RawQuery} {
		_, _ = h.WriteString(s)
		_ = h.WriteByte(0)
	}
	return max(h.Sum64(), 1)
}

// recent reports whether key's resendable answer came less than window
// before now. When every entry is that old, it empties the table, so that
// requests skip it again.
func (t *resendTable) recent(key uint64, now time.Time, window time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.newest) >= window {
		t.sets = [resendSets][resendWays]resendEntry{}
		t.live.Store(0)
		return false
	}
	set := &t.sets[key%resendSets]
	for i := range set {
		if set[i].key == key {
			return now.Sub(set[i].at) < window
		}
	}
	return false
}

// record remembers key's resendable answer at now, in place of the oldest
// entry of its set when the set is full.
func (t *resendTable) record(key uint64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := &t.sets[key%resendSets]
	slot := 0
	for i := range set {
		switch e := &set[i]; {
		case e.key == key:
			e.at = now
			t.newest = maxTime(t.newest, now)
			return
		case e.key == 0:
			slot = i
		case set[slot].key != 0 && e.at.Before(set[slot].at):
			slot = i
		}
	}
	if set[slot].key == 0 {
		t.live.Add(1)
	}
	set[slot] = resendEntry{key: key, at: now}
	t.newest = maxTime(t.newest, now)
}

// forget drops key, whose latest answer client-go does not resend.
func (t *resendTable) forget(key uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := &t.sets[key%resendSets]
	for i := range set {
		if set[i].key == key {
			set[i] = resendEntry{}
			t.live.Add(-1)
			return
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
