package peers

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
)

// a6Throttle is a reference implementation of gRPC's retry throttling,
// from grpc/proposal A6-client-retries.md ("Throttling Retry Attempts and
// Hedged RPCs", and retryThrottling in "Integration with Service
// Config"): token_count starts at maxTokens and stays within [0,
// maxTokens]; every failed RPC decrements it by 1, every successful RPC
// increments it by tokenRatio; while token_count <= maxTokens/2, RPCs are
// not retried (the first attempt of an RPC is always sent). Only failures
// with a retryable status count as failures; here that is a transport
// error, a 429 or a 5xx (gRPC's UNAVAILABLE and RESOURCE_EXHAUSTED); a
// success is any other response below 400, and other 4xx move nothing.
type a6Throttle struct {
	maxTokens, ratio float64

	mu     sync.Mutex
	tokens float64
}

func newA6Throttle(maxTokens, tokenRatio float64) *a6Throttle {
	return &a6Throttle{maxTokens: maxTokens, ratio: tokenRatio, tokens: maxTokens}
}

// record moves the tokens for one RPC's outcome.
func (t *a6Throttle) record(failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if failed {
		t.tokens = max(0, t.tokens-1)
	} else {
		t.tokens = min(t.maxTokens, t.tokens+t.ratio)
	}
}

// retryAllowed reports whether a retry may be sent.
func (t *a6Throttle) retryAllowed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens > t.maxTokens/2
}

// errA6Throttled is the error of a retry that the throttle did not send:
// neither a reset nor an EOF, so client-go does not send it again, and not
// transient, so a loop ends on it.
var errA6Throttled = errors.New("peers: gRPC retry throttling: retry not sent")

// a6Call marks the requests of one call: once one of them has failed, the
// next ones are retries.
type a6Call struct{ failed atomic.Bool }

type a6CallKey struct{}

// withA6Call marks ctx as the context of one call.
func withA6Call(ctx context.Context) context.Context {
	return context.WithValue(ctx, a6CallKey{}, &a6Call{})
}

// transport charges every request through rt to t.
func (t *a6Throttle) transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c, _ := req.Context().Value(a6CallKey{}).(*a6Call)
		if c != nil && c.failed.Load() && !t.retryAllowed() {
			return nil, errA6Throttled
		}
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil && req.Context().Err() != nil:
			// The caller gave up: not the server's failure.
		case err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			t.record(true)
			if c != nil {
				c.failed.Store(true)
			}
		case resp.StatusCode < 400:
			t.record(false)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
