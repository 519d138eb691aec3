package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// TestHoldReminders: while a hold lasts, OnHold gets a reminder with a
// failed probe once 10s have passed since the start, then after 20s, 40s:
// its start's Since, the probes and waits so far, and the latest failure
// as Err, which Held gives too; the end repeats the start's Err, and no
// reminder follows it.
func TestHoldReminders(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, time.Second) // a probe every second
	log := newHoldLog(t, b)
	startHold(t, b)
	failure := func(k int) error { return fmt.Errorf("probe %d: %w", k, errDown) }
	for k := 1; k <= 71; k++ {
		clk.Step(time.Second)
		require.Error(t, probe(b, failure(k)))
	}
	held := b.Held()
	require.Len(t, held, 1)
	assert.Equal(t, failure(71).Error(), held[0].Err.Error(), "Held's Err is the latest failure")

	clk.Step(time.Second)
	require.NoError(t, probe(b, nil))
	var got []string
	for _, e := range log.all() {
		got = append(got, fmt.Sprintf("ended %v, since %v, probes %d, err %v", e.Ended, e.Since.Sub(t0), e.Probes, e.Err))
	}
	assert.Equal(t, []string{
		"ended false, since 0s, probes 0, err " + errDown.Error(),
		"ended false, since 0s, probes 10, err " + failure(10).Error(),
		"ended false, since 0s, probes 30, err " + failure(30).Error(),
		"ended false, since 0s, probes 70, err " + failure(70).Error(),
		"ended true, since 0s, probes 72, err " + errDown.Error(),
	}, got)
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
