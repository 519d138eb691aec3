package retry_test

// The scopes on the wire: what a failure of each scope is (the server's,
// a resource's) and which requests its hold keeps waiting or refuses.
// How a path maps to its scopes: budget_scope_internal_test.go.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

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
		b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk, Rand: fullInterval} // no retry at all
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
			b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk, Rand: fullInterval} // no retry at all
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
			b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk, Rand: fullInterval} // no retry at all
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
	b := &retry.Budget{Window: time.Minute, Hold: 100 * time.Millisecond, Clock: clk, Rand: fullInterval} // no retry at all
	w := &wire{replies: []wireReply{{status: 503}}}                                                       // no Retry-After: client-go would not resend
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
