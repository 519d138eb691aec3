package retry_test

// The probes of a hold: one at a time, on the schedule of docs/budget.md
// (Hold, then an interval doubling up to 5 x Hold or 1s), what a probe
// that ends without an answer, by its context or in a panic, does to it;
// on the wire, a 429's Retry-After holding the next probe back and a
// failed probe's error naming the hold. The drawn waits themselves:
// budget_hold_internal_test.go.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// probeSchedule is the contract's probe times from a hold that started at
// start, while every probe fails at once: the first Hold after the start,
// each next one an interval after the previous one, the interval doubling
// after each failed probe up to min(5*Hold, 1s), never below Hold.
func probeSchedule(start time.Time, hold time.Duration, until time.Time) []time.Time {
	limit := max(min(5*hold, time.Second), hold)
	var out []time.Time
	interval := hold
	for at := start.Add(hold); !at.After(until); at = at.Add(interval) {
		out = append(out, at)
		interval = min(2*interval, limit)
	}
	return out
}

// probeGaps is the contract's probe schedule, written out, for the Holds
// it names: NewBudget's 100ms (0.1, 0.2, 0.4, then 0.5s: 5 x Hold) and
// 300ms (0.3, 0.6, then 1s: 5 x Hold is 1.5s, above the 1s cap).
var probeGaps = map[time.Duration][]time.Duration{
	100 * time.Millisecond: {100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
	300 * time.Millisecond: {300 * time.Millisecond, 600 * time.Millisecond, time.Second, time.Second, time.Second},
}

// TestHoldProbeSchedule: while every probe fails at once, probes go one
// at a time at the contract's times; the other callers wait throughout.
func TestHoldProbeSchedule(t *testing.T) {
	t.Parallel()
	for _, hold := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
		t.Run(hold.String(), func(t *testing.T) {
			t.Parallel()
			clk, b := onHold(t, hold)
			const n = 3
			w := startWorkers(clk, b, n, func(int) error { return errDown })
			defer w.end()
			quantum := min(hold/2, 50*time.Millisecond)
			until := t0.Add(12 * max(hold, time.Second))
			for clk.Now().Before(until) {
				awaitWaiters(t, clk, n)
				clk.Step(quantum)
			}
			awaitWaiters(t, clk, n)
			want := probeSchedule(t0, hold, until)
			require.Greater(t, len(want), 8)
			assert.Equal(t, want, w.times())
			assert.Equal(t, uint64(len(want)), b.Stats().Probes)
			if gaps, ok := probeGaps[hold]; ok {
				got := w.times()
				for i, gap := range gaps {
					prev := t0
					if i > 0 {
						prev = got[i-1]
					}
					assert.Equal(t, gap, got[i].Sub(prev), "probe %d", i+1)
				}
			}
			// Every call waited, once however often it woke: each probe, and
			// the n calls waiting now.
			assert.Equal(t, uint64(len(want)+n), b.Stats().Held)
		})
	}
}

// TestHoldProbeEndedByItsContext: a probe that its own context ended (its
// caller gave up) said nothing about the server: it frees the slot, the
// next probe goes an interval after it, and the interval stays as it was.
func TestHoldProbeEndedByItsContext(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	const n = 2
	w := startWorkers(clk, b, n, func(call int) error {
		if call == 1 {
			return context.Canceled
		}
		return errDown
	})
	defer w.end()
	for clk.Now().Before(t0.Add(4 * hold)) {
		awaitWaiters(t, clk, n)
		clk.Step(hold / 2)
	}
	awaitWaiters(t, clk, n)
	// 100ms: ended by its context; 200ms: fails, the interval doubles; 400ms.
	assert.Equal(t, []time.Time{t0.Add(hold), t0.Add(2 * hold), t0.Add(4 * hold)}, w.times())
}

// TestHoldProbeWithoutAnswer: a probe without an answer after the
// interval counts as failed and the next probe goes; the first one's late
// success still ends the hold and lets every waiting call go.
func TestHoldProbeWithoutAnswer(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	answer := make(chan error)
	up := false
	var upMu sync.Mutex
	const n = 4
	w := startWorkers(clk, b, n, func(call int) error {
		if call == 1 {
			return <-answer // the first probe hangs
		}
		upMu.Lock()
		defer upMu.Unlock()
		if up {
			return nil
		}
		return errDown
	})
	defer w.end()
	awaitWaiters(t, clk, n)
	clk.Step(hold) // the first probe goes, and hangs
	awaitWaiters(t, clk, n-1)
	clk.Step(hold - time.Millisecond)
	awaitWaiters(t, clk, n-1)
	require.Len(t, w.times(), 1, "one probe at a time")
	clk.Step(time.Millisecond) // no answer within the interval: the next goes, and fails
	awaitWaiters(t, clk, n-1)
	// The interval doubled twice (the silent probe, then the failed one):
	// the next is due 400ms after the second.
	clk.Step(399 * time.Millisecond)
	awaitWaiters(t, clk, n-1)
	require.Equal(t, []time.Time{t0.Add(hold), t0.Add(2 * hold)}, w.times())

	upMu.Lock()
	up = true
	upMu.Unlock()
	answer <- nil // the first probe's late success
	// Every waiting call goes without the clock moving.
	await(t, func() bool { return len(w.times()) >= 2+n }, "the waiting calls did not go")
	for _, at := range w.times()[2:] {
		assert.Equal(t, t0.Add(599*time.Millisecond), at)
	}
}

// TestHoldProbePanics: a probe's panic reaches its caller unchanged, and
// the probe counts as failed: the next goes an interval later.
func TestHoldProbePanics(t *testing.T) {
	t.Parallel()
	const hold = 100 * time.Millisecond
	clk, b := onHold(t, hold)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_ = retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 3}, retry.IsTransient,
			func(context.Context) error { panic("probe panics") }, retry.WithBudget(b))
	}()
	awaitWaiters(t, clk, 1)
	clk.Step(hold)
	assert.Equal(t, "probe panics", <-recovered)
	w := startWorkers(clk, b, 1, func(int) error { return nil })
	defer w.end()
	awaitWaiters(t, clk, 1)
	clk.Step(2*hold - time.Millisecond)
	awaitWaiters(t, clk, 1)
	assert.Empty(t, w.times(), "the slot is free, but the next probe is due 200ms after the first")
	clk.Step(time.Millisecond)
	await(t, func() bool { return len(w.times()) > 0 }, "no probe went")
	assert.Equal(t, t0.Add(3*hold), w.times()[0])
}

// TestWrapTransportProbeErrorNamesTheHold: a probe that meets a transport
// error returns it with the scope and how long it has been held in front
// of its text; errors.Is reaches the underlying error, and it does not
// match ErrBudgetExhausted (the probe was sent). An HTTP answer to a
// probe stays an answer.
func TestWrapTransportProbeErrorNamesTheHold(t *testing.T) {
	t.Parallel()
	clk, b := onWireHold(t, 100*time.Millisecond)
	rt := b.WrapTransport(&wire{replies: []wireReply{{err: errReset}, {status: http.StatusServiceUnavailable}}})
	clk.Step(time.Second + 200*time.Millisecond)
	err := roundTrip(t, rt, http.MethodPut, apiURL)
	require.Error(t, err)
	assert.Equal(t, "retry: probe of https://apiserver.example, held for 1.2s: "+errReset.Error(), err.Error())
	assert.True(t, strings.HasSuffix(err.Error(), errReset.Error()))
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	assert.NotErrorIs(t, err, retry.ErrBudgetExhausted)

	clk.Step(200 * time.Millisecond) // the next probe, answered 503
	resp, err := rt.RoundTrip(request(t, context.Background(), http.MethodPut, apiURL))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_ = resp.Body.Close()
}

// TestWrapTransportRetryAfterHoldsProbes: client-go's resend of a 429
// that the budget refuses starts the server's hold, whose Err names the
// Retry-After; the hold's next probe waits until d x (1 + r/2) after the
// 429 that asked for Retry-After d (here r 0.5: 2.5s for 2s), not Hold; a
// probe answered 429 counts as failed.
func TestWrapTransportRetryAfterHoldsProbes(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, 100*time.Millisecond)
	b.Rand = func() float64 { return 0.5 }
	log := newHoldLog(t, b)
	w := &wire{replies: []wireReply{{status: http.StatusTooManyRequests, retryAfter: "2"}}}
	rt := b.WrapTransport(w)
	require.NoError(t, roundTrip(t, rt, http.MethodPut, apiURL)) // answered 429
	clk.Step(2 * time.Second)                                    // client-go's wait
	require.ErrorIs(t, roundTrip(t, rt, http.MethodPut, apiURL), retry.ErrBudgetExhausted)
	events := log.all()
	require.Len(t, events, 1)
	assert.Equal(t, "retry: the server answered 429 Too Many Requests (Retry-After 2s)", events[0].Err.Error())

	const other = "https://apiserver.example/api/v1/namespaces/default/configmaps/other"
	done := make(chan error, 1)
	go func() { done <- roundTrip(t, rt, http.MethodPut, other) }()
	for clk.Since(t0) < 2500*time.Millisecond-10*time.Millisecond {
		awaitWaiters(t, clk, 1)
		clk.Step(10 * time.Millisecond)
	}
	awaitWaiters(t, clk, 1)
	assert.Equal(t, 1, w.requests(), "a probe went before the Retry-After floor")
	clk.Step(10 * time.Millisecond)
	require.NoError(t, <-done)
	assert.Equal(t, 2, w.requests(), "the probe did not go at the floor")
	assert.Equal(t, uint64(1), b.Stats().Probes)
	assert.Len(t, b.Held(), 1, "a probe answered 429 failed: the hold goes on")
}

// TestWrapTransportProbeErrorOnlyForProbes: a transport error of a
// request that is no probe is returned as it came.
func TestWrapTransportProbeErrorOnlyForProbes(t *testing.T) {
	t.Parallel()
	b := newBudget(testingclock.NewFakeClock(t0), freeRetries, 100*time.Millisecond)
	rt := b.WrapTransport(&wire{replies: []wireReply{{err: errReset}}})
	err := roundTrip(t, rt, http.MethodPut, apiURL)
	assert.True(t, errors.Is(err, syscall.ECONNRESET) && err == error(errReset), "got %v", err)
}
