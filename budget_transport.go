package retry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// WrapTransport returns an http.RoundTripper that charges each request
// through rt to b, for rest.Config.Wrap: cfg.Wrap(budget.WrapTransport).
// Every request of the process then counts, client-go's own resends and
// an informer's lists and watches included; from the first call on, b
// holds on the wire only, per scope (see [Budget].Hold).
//
// A request is a retry when client-go sends it again itself (the method
// and URL of one whose answer, within the last Window, client-go resends)
// or when a loop of this package makes it in an attempt after a transient
// failure; a retry of a held scope is refused, any other withdraws from
// b. Every other request is a first attempt: it deposits in b and waits
// while its server or resource is held; sent as a probe and met by a
// failure that client-go would resend (a reset GET), it waits again, as
// that resend would, instead of returning. A loop given WithBudget(b)
// charges its own attempts; its requests are held per scope all the same.
//
// A refused request never reaches rt: the caller gets an error (in a
// *url.Error from an http.Client) matching [ErrBudgetExhausted] and
// nothing client-go reacts to, so client-go returns it at once. Requests
// for coordination.k8s.io Leases pass through, never refused, held or
// counted; a watch is charged when it starts. Memory is bounded whatever
// the number of URLs, and a request granted while nothing fails allocates
// nothing. A nil rt means http.DefaultTransport; a nil or invalid b gives
// a RoundTripper that returns [Budget.Validate]'s error for every request.
// See docs/budget.md.
func (b *Budget) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if err := b.Validate(); err != nil {
		return &invalidTransport{err: fmt.Errorf("%w; WrapTransport's RoundTripper sends no request", err), rt: rt}
	}
	if b.wire.Load() == nil {
		b.wire.CompareAndSwap(nil, newResendTable())
	}
	return &budgetTransport{budget: b, resends: b.wire.Load(), rt: rt}
}

type budgetTransport struct {
	budget  *Budget
	resends *resendTable
	rt      http.RoundTripper
}

// WrappedRoundTripper returns the RoundTripper under the budget, as
// k8s.io/apimachinery's net.RoundTripperWrapper asks, so that client-go
// finds the transport beneath (to close its idle connections).
func (t *budgetTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// RoundTrip charges req to the budget and sends it, or refuses it.
func (t *budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isLease(req.URL.Path) {
		return t.rt.RoundTrip(req)
	}
	for {
		if resp, again, err := t.roundTrip(req); !again {
			return resp, err
		}
	}
}

// roundTrip charges req to the budget and sends it, or refuses it. again
// reports a probe that failed with no response and that client-go would
// send again itself, 1s later, into the hold (a reset or an EOF on a GET):
// req then waits for the hold again here, as that resend would, and goes
// as soon as the hold lets it, without client-go's wait.
func (t *budgetTransport) roundTrip(req *http.Request) (resp *http.Response, again bool, err error) {
	b, ctx := t.budget, req.Context()
	mark := markOf(ctx)
	charged := mark.chargedBy(b) // a loop given b charges its own attempts
	server, resource := scopesOf(req)
	resent, cause, known := t.resends.recent(req, b.time(), b.Window)
	retry := resent != noScope || mark.afterTransient()

	var probe uint64
	if retry {
		err = t.admitRetry(req, server, resource, charged, resent, cause)
	} else {
		probe, err = b.admitFirst(ctx, true, server, resource, charged)
	}
	if err != nil {
		closeBody(req)
		return nil, false, err
	}

	resp, err = t.send(req, probe)
	onServer, onResource, resends := wireOutcome(req, resp, err, resource.kind != noScope)
	var failed failure
	switch {
	case err != nil:
		failed.err = err
	case onServer == failedTransiently || onResource == failedTransiently:
		failed = answerFailure(resp, b.time().holdClock().Now())
	}
	again = probe != 0 && err != nil && resends && !isWatch(req.URL)
	if !again {
		t.resends.settle(req, b.time(), resentAfter(resends, onServer), known, failed)
		if probe != 0 && err != nil && onServer == failedTransiently {
			err = b.holds.probeFailed(probe, server, resource, b.time(), err)
		}
	}
	observed := false
	defer func() {
		if !observed && resp != nil { // OnHold panicked: the caller gets no response to close
			_ = resp.Body.Close()
		}
	}()
	b.observeScopes(!retry, probe, observation{server, onServer, failed}, observation{resource, onResource, failed})
	observed = true
	return resp, again, err
}

// admitRetry refuses a retry whose server or resource is held; else it
// withdraws the retry from the budget (unless a loop charged it). When the
// budget refuses a client-go resend, the hold starts of the scope whose
// failure it follows (resent: its kind); a loop's later attempt (resent:
// noScope) starts none, as the wire does not know which scope its previous
// attempt failed.
func (t *budgetTransport) admitRetry(req *http.Request, server, resource scope, charged bool, resent scopeKind, cause failure) error {
	failed := resource
	if resent == serverScope || failed.kind == noScope {
		failed = server
	}
	start := failed
	if resent == noScope {
		start = scope{}
	}
	s, held, ok := t.budget.chargeRetry(server, resource, charged, start, cause)
	if ok {
		return nil
	}
	if resent != noScope {
		t.resends.forget(req)
	}
	if held {
		return &wireRefusal{scope: s, held: true}
	}
	return &wireRefusal{scope: failed}
}

// resentAfter returns the kind of the scope whose failure client-go resends
// a request after (resends): its server's when the server failed, else its
// resource's; noScope when client-go does not resend it.
func resentAfter(resends bool, server outcome) scopeKind {
	switch {
	case !resends:
		return noScope
	case server == failedTransiently:
		return serverScope
	}
	return resourceScope
}

// send passes req to rt; a probe's slot is freed, as a failed probe's, if
// rt panics.
func (t *budgetTransport) send(req *http.Request, probe uint64) (*http.Response, error) {
	if probe == 0 {
		return t.rt.RoundTrip(req)
	}
	ended := false
	defer func() {
		if !ended {
			t.budget.probePanicked(probe)
		}
	}()
	resp, err := t.rt.RoundTrip(req)
	ended = true
	return resp, err
}

// wireOutcome judges a round trip for the request's server and its
// resource: no HTTP response and a 429 are failures of the server, a 5xx
// (not 501) of the resource, or of the server when the path names no
// resource; any other response answers both (a 5xx to a request with a
// resource still answers its server). A context that ended the request,
// or a Budget's refusal below, says nothing. resends reports whether
// client-go sends req again itself after it (rest.Request's request and
// Watch, through withRetry.IsNextRetry).
func wireOutcome(req *http.Request, resp *http.Response, err error, hasResource bool) (server, resource outcome, resends bool) {
	if err != nil {
		switch {
		case errors.Is(err, ErrBudgetExhausted):
			return budgetRefused, budgetRefused, false
		case req.Context().Err() != nil:
			return unanswered, unanswered, false
		case req.Method != http.MethodGet:
			return failedTransiently, unanswered, false
		case isWatch(req.URL):
			return failedTransiently, unanswered, utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
		}
		return failedTransiently, unanswered, utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests:
		server, resource = failedTransiently, unanswered
	case c >= 500 && c != http.StatusNotImplemented:
		server, resource = answered, failedTransiently
		if !hasResource {
			server = failedTransiently
		}
	default:
		return answered, answered, false
	}
	// client-go resends a 429 or 5xx whose Retry-After strconv.Atoi reads,
	// unless the request's body is a stream it cannot send twice.
	if streamedBody(req) {
		return server, resource, false
	}
	if h := resp.Header.Get("Retry-After"); h != "" {
		_, aerr := strconv.Atoi(h)
		return server, resource, aerr == nil
	}
	return server, resource, false
}

// streamedBody reports whether req's body cannot be read again: client-go
// resends no request built from an io.Reader (its Body(io.Reader)), and
// net/http sets GetBody for the byte slices client-go otherwise sends.
func streamedBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.GetBody == nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

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
