package peers

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
)

// TestA6Throttle holds the reference implementation to A6's rule with
// maxTokens 10 and tokenRatio 0.1: the tokens start at 10; each failure
// takes 1, each success gives 0.1, within [0, 10]; retries are allowed
// while the tokens are above 5.
func TestA6Throttle(t *testing.T) {
	t.Parallel()
	th := newA6Throttle(10, 0.1)
	for i := range 4 {
		th.record(true)
		if !th.retryAllowed() {
			t.Fatalf("after %d failures (%v tokens) retries refused, want allowed above 5", i+1, th.tokens)
		}
	}
	th.record(true) // 5 tokens: not above the threshold
	if th.retryAllowed() {
		t.Fatalf("at %v tokens retries allowed, want refused at maxTokens/2", th.tokens)
	}
	for range 20 { // the floor is 0
		th.record(true)
	}
	if th.tokens != 0 {
		t.Fatalf("after 25 failures %v tokens, want 0", th.tokens)
	}
	// From 0, 51 successes (5.1 tokens) let retries go again; 50 do not
	// quite (5.0, or a hair below it in floating point).
	for range 50 {
		th.record(false)
	}
	if th.retryAllowed() {
		t.Fatalf("at %v tokens retries allowed, want refused", th.tokens)
	}
	th.record(false)
	if !th.retryAllowed() {
		t.Fatalf("at %v tokens retries refused, want allowed", th.tokens)
	}
	for range 200 { // the ceiling is maxTokens
		th.record(false)
	}
	if th.tokens != 10 {
		t.Fatalf("after many successes %v tokens, want 10", th.tokens)
	}
}

// TestA6Transport checks where the throttle acts on the wire: a request
// of a call after one of its requests failed is a retry, refused (with an
// error that is neither a reset nor transient) once the tokens are at
// most 5; a first request is always sent; 429 and 5xx count as failures,
// other 4xx as nothing.
func TestA6Transport(t *testing.T) {
	t.Parallel()
	th := newA6Throttle(10, 0.1)
	status := http.StatusOK
	var fail error
	sent := 0
	rt := th.transport(roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		if fail != nil {
			return nil, fail
		}
		return &http.Response{StatusCode: status, Body: http.NoBody}, nil
	}))
	do := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/api/v1/namespaces/x/configmaps/y", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.RoundTrip(req)
		return err
	}
	call := withA6Call(t.Context())
	status = http.StatusConflict
	if err := do(call); err != nil || th.tokens != 10 {
		t.Fatalf("a 409: err %v, %v tokens; want sent, 10 tokens", err, th.tokens)
	}
	status = http.StatusServiceUnavailable
	for i := range 5 {
		if err := do(call); err != nil {
			t.Fatalf("request %d of a failing call at %v tokens: %v, want sent", i+2, th.tokens, err)
		}
	}
	// 5 tokens: the call's next request is a retry, and refused.
	fail = syscall.ECONNRESET
	before := sent
	if err := do(call); !errors.Is(err, errA6Throttled) || sent != before {
		t.Fatalf("a retry at %v tokens: %v (sent %d); want errA6Throttled, not sent", th.tokens, err, sent-before)
	}
	// A new call's first request is sent, and its reset counts.
	if err := do(withA6Call(t.Context())); !errors.Is(err, syscall.ECONNRESET) || th.tokens != 4 {
		t.Fatalf("a new call's first request: %v, %v tokens; want the reset, 4 tokens", err, th.tokens)
	}
	// Requests outside any call are first attempts.
	if err := do(t.Context()); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a request outside a call: %v, want sent", err)
	}
}
