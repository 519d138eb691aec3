package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// wireReply is one answer of a wire: a status with an optional Retry-After,
// or an error.
type wireReply struct {
	status     int
	retryAfter string
	err        error
}

// wire is a fake RoundTripper below the budget: it answers each request
// with the next reply (the last one repeats) and records what reached it.
type wire struct {
	mu      sync.Mutex
	replies []wireReply
	sent    []string // "METHOD URL"
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, req.Method+" "+req.URL.String())
	r := wireReply{status: http.StatusOK}
	if len(w.replies) > 0 {
		r = w.replies[0]
		if len(w.replies) > 1 {
			w.replies = w.replies[1:]
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	resp := &http.Response{StatusCode: r.status, Header: http.Header{}, Body: http.NoBody, Request: req}
	if r.retryAfter != "" {
		resp.Header.Set("Retry-After", r.retryAfter)
	}
	return resp, nil
}

func (w *wire) requests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sent)
}

func (w *wire) answer(replies ...wireReply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replies = replies
}

const apiURL = "https://apiserver.example/api/v1/namespaces/default/configmaps/cm"

// request builds a request as client-go does: a body of bytes (whose
// GetBody net/http sets) for the verbs that carry one.
func request(t testing.TB, ctx context.Context, method, url string) *http.Request {
	t.Helper()
	var body io.Reader
	if method != http.MethodGet {
		body = bytes.NewReader([]byte(`{"kind":"ConfigMap"}`))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// roundTrip sends a request through rt, closing the response's body.
func roundTrip(t testing.TB, rt http.RoundTripper, method, url string) error {
	t.Helper()
	resp, err := rt.RoundTrip(request(t, context.Background(), method, url))
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// timeout is a net.Error that timed out, as a transport's
// ResponseHeaderTimeout gives.
type timeout struct{}

func (timeout) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeout) Timeout() bool   { return true }
func (timeout) Temporary() bool { return true }

var (
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errH2Lost  = errors.New("http2: client connection lost")
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	watchURL   = "https://apiserver.example/api/v1/namespaces/default/configmaps?resourceVersion=7&watch=true"
	leaseURL   = "https://apiserver.example/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/controller"
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

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

// okResponse is the answer of benchWire.
var okResponse = &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}

// benchWire answers every request at once, allocating nothing.
var benchWire = roundTripFunc(func(*http.Request) (*http.Response, error) { return okResponse, nil })

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

const (
	server        = "https://apiserver.example"
	metricsURL    = server + "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"
	discoveryURL  = server + "/apis/metrics.k8s.io/v1beta1"
	secretURL     = server + "/api/v1/namespaces/default/secrets/s"
	deploymentURL = server + "/apis/apps/v1/namespaces/default/deployments/d"
)

// paths is a wire that answers by path: the status of the first entry of
// failing whose key the path contains (an error for status 0), else 200;
// for failing methods only when methods is set. It records what reached
// it.
type paths struct {
	mu      sync.Mutex
	failing map[string]wireReply
	methods map[string]bool // nil: every method fails
	sent    []string
}

func (p *paths) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.sent = append(p.sent, req.Method+" "+req.URL.Path)
	reply := wireReply{status: http.StatusOK}
	for key, r := range p.failing {
		if strings.Contains(req.URL.Path, key) && (p.methods == nil || p.methods[req.Method]) {
			reply = r
		}
	}
	p.mu.Unlock()
	return (&wire{replies: []wireReply{reply}}).RoundTrip(req)
}

func (p *paths) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sent {
		if strings.Contains(s, key) {
			n++
		}
	}
	return n
}

// scoped returns a Budget on the wire over p on a fake clock, retries
// granted freely, Hold 100ms.
func scoped(p *paths) (*testingclock.FakeClock, *retry.Budget, http.RoundTripper) {
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, freeRetries, 100*time.Millisecond)
	return clk, b, b.WrapTransport(p)
}

// waitsThenEnds sends a request that must wait for a hold, ends its
// context once it waits, and returns its error.
func waitsThenEnds(t *testing.T, clk *testingclock.FakeClock, rt http.RoundTripper, method, url string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { awaitWaiters(t, clk, 1); cancel() }()
	_, err := rt.RoundTrip(request(t, ctx, method, url))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	require.ErrorIs(t, err, context.Canceled)
	return err
}

// atOnce returns a context for requests that must not wait: should a hold
// keep one waiting on clk, the context ends, and the request returns the
// hold's error. stop ends the watch.
func atOnce(clk *testingclock.FakeClock) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer cancel()
		for waiters(clk) == 0 {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Microsecond):
			}
		}
	}()
	return ctx, func() { close(done) }
}

// goesAtOnce sends a request that must not wait, and returns its error.
func goesAtOnce(t *testing.T, clk *testingclock.FakeClock, rt http.RoundTripper, method, url string) error {
	t.Helper()
	ctx, stop := atOnce(clk)
	defer stop()
	resp, err := rt.RoundTrip(request(t, ctx, method, url))
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// TestScopesAPartialFailureStaysPartial: an aggregated API answering 503
// holds its own resource's reads, and nothing else: not the rest of the
// API, not its group's discovery, which learns of the failure on its own.
func TestScopesAPartialFailureStaysPartial(t *testing.T) {
	t.Parallel()
	p := &paths{failing: map[string]wireReply{"/apis/metrics.k8s.io/": {status: 503}}}
	clk, b, rt := scoped(p)
	for range 3 {
		require.NoError(t, roundTrip(t, rt, http.MethodGet, metricsURL))
	}
	err := waitsThenEnds(t, clk, rt, http.MethodGet, metricsURL)
	assert.Equal(t, "retry: retry budget exhausted: reads of pods.metrics.k8s.io are held; the request waited until context canceled", err.Error())

	for _, url := range []string{apiURL, deploymentURL, discoveryURL, discoveryURL, discoveryURL} {
		require.NoError(t, roundTrip(t, rt, http.MethodGet, url), url) // at once: the clock stands still
	}
	require.NoError(t, roundTrip(t, rt, http.MethodPut, metricsURL), "the writes of the resource are a scope of their own")
	assert.Equal(t, 3, p.count("GET /apis/metrics.k8s.io/v1beta1/namespaces/default/pods"), "nothing more of the held scope reached the wire")
	err = waitsThenEnds(t, clk, rt, http.MethodGet, discoveryURL)
	assert.Contains(t, err.Error(), ": reads of metrics.k8s.io are held;")
	assert.Equal(t, uint64(2), b.Stats().Held)
}

// TestScopesReadsDoNotEndTheWritesHold: a webhook fails the writes of
// Secrets; the reads that succeed meanwhile leave the writes held, and
// the writes' probe, once it succeeds, ends their hold.
func TestScopesReadsDoNotEndTheWritesHold(t *testing.T) {
	t.Parallel()
	p := &paths{failing: map[string]wireReply{"/secrets/": {status: 500}}, methods: map[string]bool{http.MethodPut: true}}
	clk, _, rt := scoped(p)
	for range 3 {
		require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL))
	}
	require.NoError(t, roundTrip(t, rt, http.MethodGet, secretURL))
	err := waitsThenEnds(t, clk, rt, http.MethodPut, secretURL)
	assert.Equal(t, "retry: retry budget exhausted: writes of secrets are held; the request waited until context canceled", err.Error())

	p.mu.Lock()
	p.failing = nil
	p.mu.Unlock()
	clk.Step(100 * time.Millisecond)
	require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL)) // the probe
	require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL)) // at once: the hold is over
	assert.Equal(t, 5, p.count("PUT"))
}

// TestScopesHeldScopeRefusesItsRetries: while a scope is held on the
// wire, its retries (a loop's later attempt after a transient failure, a
// client-go resend) are refused at once, never sent, whatever the
// budget's ratio would grant; a retry of another scope goes.
func TestScopesHeldScopeRefusesItsRetries(t *testing.T) {
	t.Parallel()
	p := &paths{failing: map[string]wireReply{"/deployments/": {status: 500, retryAfter: "1"}}, methods: map[string]bool{http.MethodPut: true}}
	_, b, rt := scoped(p)
	for _, name := range []string{"d1", "d2", "d3"} { // three first attempts: three URLs
		require.NoError(t, roundTrip(t, rt, http.MethodPut, deploymentURL+name))
	}
	// client-go's resend of d1 (its 500 carried a Retry-After).
	err := roundTrip(t, rt, http.MethodPut, deploymentURL+"d1")
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	assert.Equal(t, "retry: retry budget exhausted: writes of deployments.apps are held; the retry was not sent", err.Error())

	// A loop's second attempt after a transient failure.
	attempts := 0
	err = retry.OnErrorWithContext(context.Background(), loopBackoff, retry.IsTransient, func(ctx context.Context) error {
		if attempts++; attempts == 1 {
			return errDown
		}
		resp, err := rt.RoundTrip(request(t, ctx, http.MethodPut, deploymentURL))
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}, retry.WithSleeper(&fakeSleeper{}))
	require.ErrorIs(t, err, retry.ErrBudgetExhausted)
	assert.Equal(t, 2, attempts, "the refusal ended the loop at once")

	// The same loop on another scope: its retry is granted.
	attempts = 0
	require.NoError(t, retry.OnErrorWithContext(context.Background(), loopBackoff, retry.IsTransient, func(ctx context.Context) error {
		if attempts++; attempts == 1 {
			return errDown
		}
		resp, err := rt.RoundTrip(request(t, ctx, http.MethodPut, apiURL))
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}, retry.WithSleeper(&fakeSleeper{})))
	assert.Equal(t, 3, p.count("/deployments/"), "no retry of the held scope was sent")
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 3, Retries: 1, Refused: 2}, b.Stats())
}

// TestScopesServerFailures: a request that got no response, a 429, and a
// 5xx to a path with no resource count against the server: its hold holds
// every request to it, of any resource.
func TestScopesServerFailures(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		reply wireReply
		url   string
	}{
		"refused":               {wireReply{err: errRefused}, apiURL},
		"reset":                 {wireReply{err: errReset}, secretURL},
		"429":                   {wireReply{status: 429}, deploymentURL},
		"503 of a non-API path": {wireReply{status: 503}, server + "/healthz"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := &wire{replies: []wireReply{tt.reply}}
			clk := testingclock.NewFakeClock(t0)
			b := newBudget(clk, freeRetries, 100*time.Millisecond)
			rt := b.WrapTransport(w)
			for range 3 {
				_ = roundTrip(t, rt, http.MethodPut, tt.url)
			}
			w.answer(wireReply{status: 200})
			err := waitsThenEnds(t, clk, rt, http.MethodGet, metricsURL)
			assert.Equal(t, "retry: retry budget exhausted: https://apiserver.example is held; the request waited until context canceled", err.Error())
			assert.Equal(t, 3, w.requests())
		})
	}
}

// TestScopesA5xxAnswersTheServer: a server held after resets is answered
// by its probe's 503 for a resource: the server's hold ends (every other
// resource goes again), and the 503 counts against the resource.
func TestScopesA5xxAnswersTheServer(t *testing.T) {
	t.Parallel()
	w := &wire{replies: []wireReply{{err: errReset}}}
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, freeRetries, 100*time.Millisecond)
	rt := b.WrapTransport(w)
	for range 3 {
		require.ErrorIs(t, roundTrip(t, rt, http.MethodPut, apiURL), syscall.ECONNRESET)
	}
	w.answer(wireReply{status: 503})
	clk.Step(100 * time.Millisecond)
	require.NoError(t, roundTrip(t, rt, http.MethodGet, apiURL)) // the server's probe, answered 503
	w.answer(wireReply{status: 200})
	require.NoError(t, roundTrip(t, rt, http.MethodGet, secretURL)) // at once
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 5, Probes: 1}, b.Stats())
}

// TestScopesLoopsOnTheWire: once WrapTransport has been called, a loop
// given the Budget charges its attempts but holds nothing itself: its
// failed first attempts, and the refusal of its retry, start no hold, and
// its next call goes at once. A Budget never put on the wire holds its
// loops together.
func TestScopesLoopsOnTheWire(t *testing.T) {
	t.Parallel()
	for _, onWire := range []bool{true, false} {
		clk := testingclock.NewFakeClock(t0)
		b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk} // no retry at all
		if onWire {
			_ = b.WrapTransport(&wire{})
		}
		calls := 0
		fail := func() error { calls++; return errDown }
		for range 3 {
			err := retry.OnError(retry.Backoff{Steps: 2}, retry.IsTransient, fail, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
			require.Error(t, err)
		}
		err := retry.OnError(retry.Backoff{Steps: 2}, retry.IsTransient, fail, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
		if onWire {
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			assert.Equal(t, 4, calls, "on the wire: every call made its first attempt")
			assert.Equal(t, retry.BudgetStats{FirstAttempts: 4, Refused: 4}, b.Stats())
		} else {
			assert.Contains(t, err.Error(), "cannot wait")
			assert.Equal(t, 1, calls, "not on the wire: the first refusal started the loops' hold")
		}
	}
}

// TestScopesEveryResourceFailing: with every resource in use answering
// 503 (etcd unavailable), each resource holds on its own and the load
// stays bounded: 4 resources, 3 workers each calling again 100ms after an
// error, each call in OnErrorWithContext(DefaultBackoff, IsTransient),
// over 5s of a fake clock; NewBudget() on the wire sends at most 0.25x the
// requests of no budget.
func TestScopesEveryResourceFailing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	resources := []string{"configmaps", "secrets", "pods", "services"}
	const perResource = 3
	workers := len(resources) * perResource

	run := func(budget *retry.Budget) int64 {
		clk := testingclock.NewFakeClock(t0)
		rt := srv.Client().Transport
		if budget != nil {
			budget.Clock = clk
			rt = budget.WrapTransport(rt)
		}
		client := &http.Client{Transport: rt}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for i := range workers {
			url := srv.URL + "/api/v1/namespaces/default/" + resources[i%len(resources)] + "/x"
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					_ = retry.OnErrorWithContext(ctx, retry.DefaultBackoff, retry.IsTransient, func(ctx context.Context) error {
						req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
						if err != nil {
							return err
						}
						resp, err := client.Do(req)
						if err != nil {
							return err
						}
						_ = resp.Body.Close()
						return apierrors.NewServiceUnavailable("etcd is unavailable")
					}, retry.WithSleeper(&fakeSleeper{hook: func(d time.Duration) { <-clk.After(d) }}), retry.WithRand(func() float64 { return 0.5 }))
					select {
					case <-ctx.Done():
					case <-clk.After(100 * time.Millisecond):
					}
				}
			}()
		}
		start := hits.Load()
		for range 500 { // 5s in steps of 10ms, each once every worker waits on the clock
			awaitWaiters(t, clk, workers)
			clk.Step(10 * time.Millisecond)
		}
		awaitWaiters(t, clk, workers)
		sent := hits.Load() - start
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for {
			select {
			case <-done:
				return sent
			case <-time.After(100 * time.Microsecond):
				clk.Step(10 * time.Millisecond)
			}
		}
	}
	without := run(nil)
	with := run(retry.NewBudget())
	t.Logf("requests in 5s with every resource failing: %d without a budget, %d with NewBudget() (%.2fx)", without, with, float64(with)/float64(without))
	assert.LessOrEqual(t, float64(with), 0.25*float64(without))
	assert.Positive(t, with, "the probes go")
}

// TestScopesARefusedRetryHoldsTheScopeThatFailed: a resend that the
// budget has no retry for starts the hold of the scope its failure
// counted against: the resource after a 503, the server after a reset.
func TestScopesARefusedRetryHoldsTheScopeThatFailed(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		reply wireReply
		held  string // the scope held
		other string // a URL that goes at once
	}{
		"503 with a Retry-After": {wireReply{status: 503, retryAfter: "1"}, "reads of secrets", apiURL},
		"a reset GET":            {wireReply{err: errReset}, "https://apiserver.example", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk} // no retry at all
			w := &wire{replies: []wireReply{tt.reply}}
			rt := b.WrapTransport(w)
			_ = roundTrip(t, rt, http.MethodGet, secretURL)
			err := roundTrip(t, rt, http.MethodGet, secretURL) // client-go's resend
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			assert.Contains(t, err.Error(), "the budget refused a retry of "+tt.held+" and did not send it")
			w.answer(wireReply{status: 200})
			sent := 1
			if tt.other != "" {
				require.NoError(t, roundTrip(t, rt, http.MethodGet, tt.other))
				sent++
			}
			err = waitsThenEnds(t, clk, rt, http.MethodGet, secretURL)
			assert.Contains(t, err.Error(), ": "+tt.held+" ")
			assert.Equal(t, sent, w.requests(), "the refused resend and the held request were not sent")
		})
	}
}

// TestScopesARefusedResendHoldsOnlyTheScopeItFollowed: a resend that the
// budget has no retry for starts the hold of the scope whose failure it
// follows, whatever else failed meanwhile. A GET of a Secret answered 503
// with a Retry-After (a failure of reads of secrets), then a 429 to an
// unrelated request (a failure of the server): the refused resend of the
// GET holds the reads of secrets only, and a GET of a ConfigMap goes at
// once. The mirror: a 429 with a Retry-After, after a 503 of another
// resource, holds the server, every request to it.
func TestScopesARefusedResendHoldsOnlyTheScopeItFollowed(t *testing.T) {
	t.Parallel()
	podURL := server + "/api/v1/namespaces/default/pods/p"
	tests := map[string]struct {
		first, other string      // the request resent, and the unrelated one before its resend
		replies      []wireReply // to first, then to other
		held         string      // the scope the refused resend holds
		goes         bool        // a GET of a ConfigMap goes at once
	}{
		"a 503's resend after a 429 elsewhere": {
			secretURL, podURL,
			[]wireReply{{status: 503, retryAfter: "1"}, {status: 429}},
			"reads of secrets", true,
		},
		"a 429's resend after a 503 elsewhere": {
			podURL, secretURL,
			[]wireReply{{status: 429, retryAfter: "1"}, {status: 503}},
			"https://apiserver.example", false,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk} // no retry at all
			w := &wire{replies: append(tt.replies, wireReply{status: 200})}
			rt := b.WrapTransport(w)
			require.NoError(t, roundTrip(t, rt, http.MethodGet, tt.first))
			require.NoError(t, roundTrip(t, rt, http.MethodGet, tt.other))
			err := roundTrip(t, rt, http.MethodGet, tt.first) // client-go's resend
			require.ErrorIs(t, err, retry.ErrBudgetExhausted)
			assert.Equal(t, "retry: retry budget exhausted: the budget refused a retry of "+tt.held+" and did not send it", err.Error())
			sent := 2
			if tt.goes {
				require.NoError(t, goesAtOnce(t, clk, rt, http.MethodGet, apiURL), "a ConfigMap's GET waits for a failure of the reads of secrets")
				sent++
			} else {
				err = waitsThenEnds(t, clk, rt, http.MethodGet, apiURL)
				assert.Contains(t, err.Error(), ": "+tt.held+" is held;")
			}
			err = waitsThenEnds(t, clk, rt, http.MethodGet, tt.first)
			assert.Contains(t, err.Error(), ": "+tt.held+" ")
			assert.Equal(t, sent, w.requests(), "the refused resend and the held requests were not sent")
		})
	}
}

// TestScopesARefusedLoopRetryStartsNoHold: a loop's later attempt after a
// transient failure that the budget refuses on the wire starts no hold,
// as the wire does not know which scope the previous attempt failed; the
// next call goes at once. The failures of first attempts still hold.
func TestScopesARefusedLoopRetryStartsNoHold(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk} // no retry at all
	w := &wire{replies: []wireReply{{status: 503}}}                                   // no Retry-After: client-go would not resend
	rt := b.WrapTransport(w)
	get := func(ctx context.Context) error {
		resp, err := rt.RoundTrip(request(t, ctx, http.MethodGet, secretURL))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return apierrors.NewServiceUnavailable("down")
	}
	for i := range 2 {
		ctx, stop := atOnce(clk)
		err := retry.OnErrorWithContext(ctx, loopBackoff, retry.IsTransient, get, retry.WithSleeper(&fakeSleeper{}))
		stop()
		require.ErrorIs(t, err, retry.ErrBudgetExhausted)
		assert.Contains(t, err.Error(), "the budget refused a retry of reads of secrets and did not send it")
		assert.Equal(t, i+1, w.requests(), "each call's first attempt went at once; its retry was refused")
	}
	// The third failed first attempt of reads of secrets starts their hold.
	ctx, stop := atOnce(clk)
	err := retry.OnErrorWithContext(ctx, loopBackoff, retry.IsTransient, get, retry.WithSleeper(&fakeSleeper{}))
	stop()
	assert.Contains(t, err.Error(), ": reads of secrets are held; the retry was not sent")
	err = waitsThenEnds(t, clk, rt, http.MethodGet, secretURL)
	assert.Contains(t, err.Error(), ": reads of secrets are held;")
	assert.Equal(t, 3, w.requests())
	assert.Equal(t, retry.BudgetStats{FirstAttempts: 3, Refused: 3, Held: 1}, b.Stats())
}
