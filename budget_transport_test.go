package retry_test

// WrapTransport: which request is a first attempt and which a retry
// (client-go's resends, a loop's marks), a refusal on the wire, a hold's
// requests and probes, Leases and watches, the success path's cost. The
// fakes below it: fakewire_test.go.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// onWireHold returns a Budget with no retries on a fake clock at t0, on the wire,
// whose server (apiserver.example) is held: three of its first attempts
// got no response.
func onWireHold(t testing.TB, hold time.Duration) (*testingclock.FakeClock, *retry.Budget) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, hold)
	rt := b.WrapTransport(&wire{replies: []wireReply{{err: errReset}}})
	for range 3 {
		require.ErrorIs(t, roundTrip(t, rt, http.MethodPut, apiURL), syscall.ECONNRESET)
	}
	return clk, b
}

// TestWrapTransportClientGoResends: a request with the method and URL of
// one whose answer client-go resends (rest.Request: a 429 or 5xx whose
// Retry-After strconv.Atoi reads, on any verb whose body is not a stream;
// a reset, an EOF or a lost HTTP/2 connection on a GET; an EOF or a
// timeout on a watch) is a retry; any other is a first attempt.
func TestWrapTransportClientGoResends(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		url    string
		first  wireReply
		retry  bool
	}{
		{"GET 503 Retry-After 1", http.MethodGet, apiURL, wireReply{status: 503, retryAfter: "1"}, true},
		{"PUT 503 Retry-After 1", http.MethodPut, apiURL, wireReply{status: 503, retryAfter: "1"}, true},
		{"POST 429 Retry-After 2", http.MethodPost, apiURL, wireReply{status: 429, retryAfter: "2"}, true},
		{"GET 500 Retry-After +5, which Atoi reads", http.MethodGet, apiURL, wireReply{status: 500, retryAfter: "+5"}, true},
		{"GET 504 Retry-After 0", http.MethodGet, apiURL, wireReply{status: 504, retryAfter: "0"}, true},
		{"GET 503 without Retry-After", http.MethodGet, apiURL, wireReply{status: 503}, false},
		{"GET 503 Retry-After an HTTP-date", http.MethodGet, apiURL, wireReply{status: 503, retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT"}, false},
		{"GET 404 Retry-After 1", http.MethodGet, apiURL, wireReply{status: 404, retryAfter: "1"}, false},
		{"GET 409", http.MethodGet, apiURL, wireReply{status: 409}, false},
		{"GET reset", http.MethodGet, apiURL, wireReply{err: errReset}, true},
		{"GET EOF", http.MethodGet, apiURL, wireReply{err: io.EOF}, true},
		{"GET unexpected EOF", http.MethodGet, apiURL, wireReply{err: io.ErrUnexpectedEOF}, true},
		{"GET HTTP/2 connection lost", http.MethodGet, apiURL, wireReply{err: errH2Lost}, true},
		{"GET connection refused", http.MethodGet, apiURL, wireReply{err: errRefused}, false},
		{"GET timeout", http.MethodGet, apiURL, wireReply{err: timeout{}}, false},
		{"PUT reset", http.MethodPut, apiURL, wireReply{err: errReset}, false},
		{"PATCH EOF", http.MethodPatch, apiURL, wireReply{err: io.EOF}, false},
		{"watch timeout", http.MethodGet, watchURL, wireReply{err: timeout{}}, true},
		{"watch EOF", http.MethodGet, watchURL, wireReply{err: io.EOF}, true},
		{"watch reset", http.MethodGet, watchURL, wireReply{err: errReset}, true},
		{"watch HTTP/2 connection lost", http.MethodGet, watchURL, wireReply{err: errH2Lost}, false},
		{"watch=1 timeout", http.MethodGet, apiURL + "?watch=1", wireReply{err: timeout{}}, true},
		{"watch=false timeout", http.MethodGet, apiURL + "?watch=false", wireReply{err: timeout{}}, false},
		{"old watch path timeout", http.MethodGet, "https://apiserver.example/api/v1/watch/namespaces/default/configmaps", wireReply{err: timeout{}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: 10 * time.Second}
			w := &wire{}
			rt := b.WrapTransport(w)
			w.answer(tt.first, wireReply{status: 200})
			_ = roundTrip(t, rt, tt.method, tt.url)
			require.NoError(t, roundTrip(t, rt, tt.method, tt.url))
			want := retry.BudgetStats{FirstAttempts: 2}
			if tt.retry {
				want = retry.BudgetStats{FirstAttempts: 1, Retries: 1}
			}
			assert.Equal(t, want, b.Stats())
			// Another request, or the same after the success, is a first attempt.
			require.NoError(t, roundTrip(t, rt, tt.method, tt.url))
			require.NoError(t, roundTrip(t, rt, tt.method, tt.url+"x"))
			want.FirstAttempts += 2
			assert.Equal(t, want, b.Stats())
		})
	}
}

// TestWrapTransportResendOfAStream: client-go resends no request whose
// body is a stream (a Body(io.Reader)), which net/http gives no GetBody.
func TestWrapTransportResendOfAStream(t *testing.T) {
	t.Parallel()
	b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: 10 * time.Second}
	w := &wire{replies: []wireReply{{status: 503, retryAfter: "1"}}}
	rt := b.WrapTransport(w)
	for range 2 {
		req, err := http.NewRequest(http.MethodPut, apiURL, io.MultiReader(strings.NewReader("{}")))
		require.NoError(t, err)
		require.Nil(t, req.GetBody)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 2}, b.Stats())
}

// TestWrapTransportResendsWithinTheWindow: a resend counts as a retry
// within the Window after the answer it follows, not at its end.
func TestWrapTransportResendsWithinTheWindow(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: 3 * time.Second, Clock: clk}
	w := &wire{replies: []wireReply{{status: 503, retryAfter: "1"}}}
	rt := b.WrapTransport(w)
	_ = roundTrip(t, rt, http.MethodGet, apiURL)
	clk.Step(3*time.Second - 1)
	_ = roundTrip(t, rt, http.MethodGet, apiURL)
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 1, Retries: 1}, b.Stats())
	clk.Step(3 * time.Second)
	_ = roundTrip(t, rt, http.MethodGet, apiURL)
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 2, Retries: 1}, b.Stats())

	// Each failure counts for its own Window.
	clk.Step(2 * time.Second)
	_ = roundTrip(t, rt, http.MethodGet, apiURL+"2")
	clk.Step(time.Second)
	_ = roundTrip(t, rt, http.MethodGet, apiURL) // 3s after its failure
	_ = roundTrip(t, rt, http.MethodGet, apiURL+"2")
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 4, Retries: 2}, b.Stats())
}

// TestWrapTransportRefusal: a refused retry never reaches the wire; its
// error, as an http.Client returns it, matches ErrBudgetExhausted and
// nothing client-go resends after: no reset, no EOF, no timeout, no lost
// connection, not transient.
func TestWrapTransportRefusal(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			b := &retry.Budget{Window: time.Minute} // no retry at all
			client := &http.Client{Transport: b.WrapTransport(srv.Client().Transport)}
			do := func() (*http.Response, error) {
				return client.Do(request(t, context.Background(), method, srv.URL+"/api/v1/namespaces/default/pods/p"))
			}
			resp, err := do()
			require.NoError(t, err)
			_ = resp.Body.Close()
			resp, err = do()
			require.Error(t, err)
			require.Nil(t, resp)
			assert.Equal(t, int32(1), hits.Load(), "the refused request never reached the server")
			var urlErr interface{ Unwrap() error }
			require.ErrorAs(t, err, &urlErr)
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
			scope := map[string]string{http.MethodGet: "reads of pods", http.MethodPut: "writes of pods", http.MethodDelete: "writes of pods"}[method]
			assert.Contains(t, err.Error(), "retry: retry budget exhausted: the budget refused a retry of "+scope+" and did not send it")
			for name, reacts := range map[string]func(error) bool{
				"IsConnectionReset":     utilnet.IsConnectionReset,
				"IsProbableEOF":         utilnet.IsProbableEOF,
				"IsTimeout":             utilnet.IsTimeout,
				"IsHTTP2ConnectionLost": utilnet.IsHTTP2ConnectionLost,
				"IsConnectionRefused":   utilnet.IsConnectionRefused,
				"IsTransient":           retry.IsTransient,
			} {
				assert.False(t, reacts(err), "%s(%v)", name, err)
			}
			assert.Equal(t, retry.BudgetStats{FirstAttempts: 1, Refused: 1}, b.Stats())
			// The refusal is the URL's latest answer: the next request is a
			// first attempt.
			resp, err = do()
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, retry.BudgetStats{FirstAttempts: 2, Refused: 1}, b.Stats())
		})
	}
}

// closeRecorder is a request body that records its Close.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// TestWrapTransportClosesTheBodyOfARequestItDoesNotSend: a RoundTripper
// must close the request's body, also when it returns an error.
func TestWrapTransportClosesTheBodyOfARequestItDoesNotSend(t *testing.T) {
	t.Parallel()
	clk, held := onWireHold(t, time.Hour)
	refusing := &retry.Budget{Window: time.Minute}
	w := &wire{replies: []wireReply{{status: 503, retryAfter: "1"}}}
	rt := refusing.WrapTransport(w)
	_ = roundTrip(t, rt, http.MethodPut, apiURL)
	ctx, cancel := context.WithCancel(context.Background())
	cases := map[string]struct {
		rt     http.RoundTripper
		before func()
	}{
		"refused":         {rt, nil},
		"held, cancelled": {held.WrapTransport(w), func() { awaitWaiters(t, clk, 1); cancel() }},
		"nil budget":      {(*retry.Budget)(nil).WrapTransport(w), nil},
	}
	for name, c := range cases {
		body := &closeRecorder{Reader: strings.NewReader("{}")}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, apiURL, body)
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return body, nil }
		if c.before != nil {
			go c.before()
		}
		_, err = c.rt.RoundTrip(req)
		require.Error(t, err, name)
		assert.True(t, body.closed.Load(), name)
	}
	assert.Equal(t, 1, w.requests())
}

// TestWrapTransportHold: first attempts on the wire are held as a loop's
// are: 3 transient failures start a hold; a held request is not sent
// until the probe, or its context ends; the probe's success ends the hold.
func TestWrapTransportHold(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, freeRetries, 100*time.Millisecond)
	w := &wire{replies: []wireReply{{err: errReset}}}
	client := &http.Client{Transport: b.WrapTransport(w)}
	for range 3 {
		_, err := client.Do(request(t, context.Background(), http.MethodPut, apiURL))
		require.ErrorIs(t, err, syscall.ECONNRESET)
	}

	// A request now waits; its context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { awaitWaiters(t, clk, 1); cancel() }()
	_, err := client.Do(request(t, ctx, http.MethodPut, apiURL))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err) || utilnet.IsConnectionReset(err), "%v", err)
	assert.Equal(t, 3, w.requests())

	// Two wait; at Hold, one goes as the probe and succeeds; the other
	// goes then.
	w.answer(wireReply{status: 200})
	var wg sync.WaitGroup
	for range 2 {
		wgGo(&wg, func() {
			resp, err := client.Do(request(t, context.Background(), http.MethodGet, apiURL))
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
			}
		})
	}
	awaitWaiters(t, clk, 2)
	assert.Equal(t, 3, w.requests())
	clk.Step(100 * time.Millisecond)
	wg.Wait()
	assert.Equal(t, 5, w.requests())
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 5, Held: 3, Probes: 1}, b.Stats())
}

// TestWrapTransportHeldUntilTheAttemptTimeout: a request held on the wire
// until its attempt's own deadline (WithAttemptTimeout) was never sent, so
// the loop returns the hold's error at once instead of retrying it as an
// attempt that ran out of its time, which would send a retry during the
// hold.
func TestWrapTransportHeldUntilTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0) // never stepped: the hold outlasts the attempt
	b := newBudget(clk, freeRetries, 100*time.Millisecond)
	w := &wire{replies: []wireReply{{err: errReset}}}
	rt := b.WrapTransport(w)
	for range 3 {
		require.ErrorIs(t, roundTrip(t, rt, http.MethodPut, apiURL), syscall.ECONNRESET)
	}
	attempts := 0
	err := retry.OnErrorWithContext(context.Background(), loopBackoff, always, func(ctx context.Context) error {
		attempts++
		resp, err := rt.RoundTrip(request(t, ctx, http.MethodGet, apiURL))
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}, retry.WithAttemptTimeout(5*time.Millisecond), retry.WithSleeper(&fakeSleeper{}))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, attempts)
	assert.Equal(t, 3, w.requests(), "nothing sent during the hold")
	assert.Zero(t, b.Stats().Retries)
}

// TestWrapTransportProbePanics: a probe whose RoundTripper panics frees
// its slot; the panic reaches the caller.
func TestWrapTransportProbePanics(t *testing.T) {
	t.Parallel()
	clk, b := onWireHold(t, 100*time.Millisecond)
	panicking := roundTripFunc(func(*http.Request) (*http.Response, error) { panic("the transport panics") })
	clk.Step(100 * time.Millisecond) // the probe is due: the request goes at once
	assert.PanicsWithValue(t, "the transport panics", func() {
		_, _ = b.WrapTransport(panicking).RoundTrip(request(t, context.Background(), http.MethodGet, apiURL))
	})
	// The probe failed: the next goes 200ms after it.
	w := &wire{}
	done := make(chan error, 1)
	go func() { done <- roundTrip(t, b.WrapTransport(w), http.MethodGet, apiURL) }()
	awaitWaiters(t, clk, 1)
	clk.Step(199 * time.Millisecond)
	awaitWaiters(t, clk, 1)
	assert.Zero(t, w.requests())
	clk.Step(time.Millisecond)
	require.NoError(t, <-done)
	assert.Equal(t, uint64(2), b.Stats().Probes)
}

// TestWrapTransportFailedProbeWaitsAgain: a probe that gets no response
// and that client-go would send again itself after its 1s wait (a reset
// GET) waits for the hold again in the transport, as that resend would,
// and goes as the next probe; a failed probe that client-go does not
// resend (a reset PUT) returns its error; a request waiting again returns
// the hold's error when its context ends.
func TestWrapTransportFailedProbeWaitsAgain(t *testing.T) {
	t.Parallel()
	clk, b := onWireHold(t, 100*time.Millisecond)
	w := &wire{replies: []wireReply{{err: errReset}, {status: http.StatusOK}}}
	rt := b.WrapTransport(w)
	done := make(chan error, 1)
	go func() { done <- roundTrip(t, rt, http.MethodGet, apiURL) }()
	awaitWaiters(t, clk, 1)
	clk.Step(100 * time.Millisecond) // the first probe: reset
	await(t, func() bool { return w.requests() == 1 && waiters(clk) == 1 }, "the failed probe does not wait again")
	clk.Step(199 * time.Millisecond)
	awaitWaiters(t, clk, 1)
	assert.Equal(t, 1, w.requests(), "sent again before the next probe is due")
	clk.Step(time.Millisecond) // the next probe, 200ms after the first: 200 OK
	require.NoError(t, <-done)
	assert.Equal(t, 2, w.requests())
	// Two first attempts held and sent as probes: the request, and its
	// sending again (client-go's resend would have been one too).
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 5, Held: 2, Probes: 2}, b.Stats())
	assert.Nil(t, b.Held(), "the probe's success ended the hold")

	// A PUT's probe that meets a reset returns it: client-go does not
	// resend it.
	clk, b = onWireHold(t, 100*time.Millisecond)
	clk.Step(100 * time.Millisecond)
	require.ErrorIs(t, roundTrip(t, b.WrapTransport(&wire{replies: []wireReply{{err: errReset}}}), http.MethodPut, apiURL), syscall.ECONNRESET)

	// A GET waiting again after its failed probe: its context ends it.
	clk.Step(200 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	w = &wire{replies: []wireReply{{err: io.EOF}}}
	go func() {
		await(t, func() bool { return w.requests() == 1 && waiters(clk) == 1 }, "no wait again")
		cancel()
	}()
	_, err := b.WrapTransport(w).RoundTrip(request(t, ctx, http.MethodGet, apiURL))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, w.requests())
}

// TestWrapTransportLeases: leader election's Lease requests are never
// held, refused or counted.
func TestWrapTransportLeases(t *testing.T) {
	t.Parallel()
	_, b := onHold(t, time.Hour) // no probe for an hour; no retry at all
	before := b.Stats()
	w := &wire{replies: []wireReply{{status: 503, retryAfter: "1"}, {status: 503, retryAfter: "1"}, {status: 200}}}
	rt := b.WrapTransport(w)
	// A held request would wait an hour; its context ends it sooner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send := func(method, url string) {
		resp, err := rt.RoundTrip(request(t, ctx, method, url))
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	for _, method := range []string{http.MethodGet, http.MethodGet, http.MethodPut} {
		send(method, leaseURL)
	}
	send(http.MethodGet, "https://apiserver.example/apis/coordination.k8s.io/v1/leases?watch=true")
	assert.Equal(t, 4, w.requests())
	assert.Equal(t, before, b.Stats())
}

// TestWrapTransportLoopMarks: a request made in a later attempt of a loop
// after a transient failure is a retry; after a Conflict, a first
// attempt. A loop given WithBudget for the transport's budget charges
// itself: the transport charges nothing for its requests, nested loops'
// included.
func TestWrapTransportLoopMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	get := func(rt http.RoundTripper) func(context.Context) error {
		return func(ctx context.Context) error {
			resp, err := rt.RoundTrip(request(t, ctx, http.MethodGet, apiURL))
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			return nil
		}
	}
	// attempts fails the first n attempts with err, then sends the request.
	attempts := func(n int, err error, send func(context.Context) error) func(context.Context) error {
		calls := 0
		return func(ctx context.Context) error {
			if calls++; calls <= n {
				return err
			}
			return send(ctx)
		}
	}
	tests := []struct {
		name string
		run  func(b, other *retry.Budget, rt http.RoundTripper) error
		want retry.BudgetStats
	}{
		{"after a transient failure", func(_, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, errDown, get(rt)), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{Retries: 1}},
		{"after a Conflict", func(_, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, conflict(1), get(rt)), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{FirstAttempts: 1}},
		{"after an attempt that ran out of its own time", func(_, _ *retry.Budget, rt http.RoundTripper) error {
			calls := 0
			return retry.OnErrorWithContext(ctx, loopBackoff, func(error) bool { return false }, func(ctx context.Context) error {
				if calls++; calls == 1 {
					<-ctx.Done() // the attempt's own deadline
					return ctx.Err()
				}
				return get(rt)(ctx)
			}, retry.WithAttemptTimeout(time.Millisecond), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{Retries: 1}},
		{"after the quota admission's Conflict", func(_, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, retry.IsTransient, attempts(1, quotaConflict(), get(rt)), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{FirstAttempts: 1}},
		{"a first attempt", func(_, _ *retry.Budget, rt http.RoundTripper) error {
			_, err := retry.OnErrorValue(ctx, loopBackoff, always, func(ctx context.Context) (int, error) { return 0, get(rt)(ctx) })
			return err
		}, retry.BudgetStats{FirstAttempts: 1}},
		{"inside a loop with this budget", func(b, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, errDown, get(rt)), retry.WithSleeper(&fakeSleeper{}), retry.WithBudget(b))
		}, retry.BudgetStats{FirstAttempts: 1, Retries: 1}}, // the loop's own
		{"inside a loop with another budget", func(_, other *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, errDown, get(rt)), retry.WithSleeper(&fakeSleeper{}), retry.WithBudget(other))
		}, retry.BudgetStats{Retries: 1}},
		{"a loop without a budget inside one with this budget", func(b, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, func(ctx context.Context) error {
				return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(2, errDown, get(rt)), retry.WithSleeper(&fakeSleeper{}))
			}, retry.WithBudget(b))
		}, retry.BudgetStats{FirstAttempts: 1}},
		{"a first attempt inside a retry of an outer loop", func(b, _ *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, errDown, func(ctx context.Context) error {
				return retry.OnErrorWithContext(ctx, loopBackoff, always, get(rt))
			}), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{Retries: 1}},
		{"a first attempt of a loop with another budget inside a retry of an outer loop", func(_, other *retry.Budget, rt http.RoundTripper) error {
			return retry.OnErrorWithContext(ctx, loopBackoff, always, attempts(1, errDown, func(ctx context.Context) error {
				return retry.OnErrorWithContext(ctx, loopBackoff, always, get(rt), retry.WithBudget(other))
			}), retry.WithSleeper(&fakeSleeper{}))
		}, retry.BudgetStats{Retries: 1}},
		{"a write loop's attempt", func(b, _ *retry.Budget, rt http.RoundTripper) error {
			c := newCalls()
			_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil, c.get, c.claim("a"),
				func(ctx context.Context, obj *Counter) (*Counter, error) { return obj, get(rt)(ctx) })
			return err
		}, retry.BudgetStats{FirstAttempts: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: 10 * time.Second}
			other := &retry.Budget{Ratio: 1, MinPerSecond: 100, Window: 10 * time.Second}
			w := &wire{}
			rt := b.WrapTransport(w)
			_ = other.WrapTransport(w) // on the wire too, elsewhere
			require.NoError(t, tt.run(b, other, rt))
			assert.Equal(t, 1, w.requests())
			assert.Equal(t, tt.want, b.Stats())
		})
	}
}

// TestWrapTransportWatchIsChargedWhenItStarts: a watch deposits a first
// attempt when it starts, and its response's headers are its answer: a
// watch that goes as the probe ends the hold while its body still
// streams.
func TestWrapTransportWatchIsChargedWhenItStarts(t *testing.T) {
	t.Parallel()
	clk, b := onWireHold(t, 100*time.Millisecond)
	events, stream := io.Pipe()
	defer func() { _ = stream.Close() }()
	watching := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.RawQuery, "watch=true") {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: events, Request: req}, nil
		}
		return (&wire{}).RoundTrip(req)
	})
	rt := b.WrapTransport(watching)
	clk.Step(100 * time.Millisecond)
	resp, err := rt.RoundTrip(request(t, context.Background(), http.MethodGet, watchURL))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	// The watch is open; the hold is over: a request goes at once.
	require.NoError(t, roundTrip(t, rt, http.MethodGet, apiURL))
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 3 + 2, Probes: 1}, b.Stats())
}

// TestWrapTransportBadInput: a nil or invalid Budget gives a transport
// that sends nothing and returns Validate's error; a nil RoundTripper
// means http.DefaultTransport.
func TestWrapTransportBadInput(t *testing.T) {
	t.Parallel()
	for name, b := range map[string]*retry.Budget{"nil": nil, "zero": {}, "negative Hold": {Window: time.Second, Hold: -1}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := &wire{}
			client := &http.Client{Transport: b.WrapTransport(w)}
			_, err := client.Do(request(t, context.Background(), http.MethodGet, apiURL))
			require.ErrorIs(t, err, retry.ErrInvalidBudget)
			assert.Contains(t, err.Error(), b.Validate().Error())
			assert.Contains(t, err.Error(), "WrapTransport's RoundTripper sends no request")
			assert.False(t, utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err))
			assert.Zero(t, w.requests())
			assert.Same(t, http.RoundTripper(w), b.WrapTransport(w).(utilnet.RoundTripperWrapper).WrappedRoundTripper())
		})
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	b := &retry.Budget{Window: time.Second}
	rt := b.WrapTransport(nil)
	assert.Same(t, http.DefaultTransport, rt.(utilnet.RoundTripperWrapper).WrappedRoundTripper())
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, uint64(1), b.Stats().FirstAttempts)
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// TestWrapTransportBoundedMemory: however many URLs fail, the transport
// allocates nothing per request (its table of recent failures has a fixed
// size), and it still recognizes the latest ones' resends.
func TestWrapTransportBoundedMemory(t *testing.T) {
	b := &retry.Budget{Ratio: 1, MinPerSecond: 1e9, Window: time.Hour}
	failing := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody}
	rt := b.WrapTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return failing, nil }))
	const urls = 20000
	reqs := make([]*http.Request, urls)
	for i := range reqs {
		reqs[i] = request(t, context.Background(), http.MethodGet, fmt.Sprintf("%s-%d", apiURL, i))
	}
	next := 0
	allocs := testing.AllocsPerRun(urls-1, func() {
		_, _ = rt.RoundTrip(reqs[next])
		next++
	})
	assert.Zero(t, allocs)
	require.Equal(t, urls, next)
	before := b.Stats()
	_, _ = rt.RoundTrip(reqs[urls-1]) // the latest: a resend
	_, _ = rt.RoundTrip(reqs[0])      // long forgotten: a first attempt
	after := b.Stats()
	assert.Equal(t, before.Retries+1, after.Retries)
	assert.Equal(t, before.FirstAttempts+1, after.FirstAttempts)
}

func TestWrapTransportGrantedRequestAllocations(t *testing.T) {
	rt := retry.NewBudget().WrapTransport(benchWire)
	req := request(t, context.Background(), http.MethodGet, apiURL)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = rt.RoundTrip(req) }))

	// A loop given a budget that is also on the wire marks the context it
	// passes to fn, so that the transport charges nothing: one allocation a
	// call, which a budget only loops use does not cost.
	loop := func(b *retry.Budget, rt http.RoundTripper) float64 {
		ctx := context.Background()
		return testing.AllocsPerRun(1000, func() {
			_ = retry.OnErrorWithContext(ctx, retry.DefaultRetry, retry.IsTransient, func(ctx context.Context) error {
				_, err := rt.RoundTrip(req.WithContext(ctx))
				return err
			}, retry.WithBudget(b))
		})
	}
	onWire := retry.NewBudget()
	assert.Equal(t, loop(retry.NewBudget(), rt)+1, loop(onWire, onWire.WrapTransport(benchWire)))
}

// BenchmarkWrapTransportGranted is a first attempt through WrapTransport
// on a healthy server, with NewBudget's budget: the budget's cost on every
// request.
func BenchmarkWrapTransportGranted(b *testing.B) {
	b.ReportAllocs()
	rt := retry.NewBudget().WrapTransport(benchWire)
	req := request(b, context.Background(), http.MethodGet, apiURL)
	b.ResetTimer()
	for range b.N {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrapTransportGrantedParallel shares the budget between
// GOMAXPROCS goroutines.
func BenchmarkWrapTransportGrantedParallel(b *testing.B) {
	b.ReportAllocs()
	rt := retry.NewBudget().WrapTransport(benchWire)
	b.RunParallel(func(pb *testing.PB) {
		req := request(b, context.Background(), http.MethodGet, apiURL)
		for pb.Next() {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Error(err)
			}
		}
	})
}
