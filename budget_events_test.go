package retry_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kuberetry/retry"
)

// holdLog records a Budget's hold events and checks, in each OnHold
// call, the rules every event keeps: a scope's holds alternate, start
// first, a reminder (its start's Since) only between a start and its
// end; two calls of one scope never overlap; an end repeats
// its start's Since and Err; Held lists the scope during a start's or a
// reminder's call and not during an end's.
type holdLog struct {
	t      testing.TB
	budget *retry.Budget
	mu     sync.Mutex
	events []retry.HoldEvent
	open   map[string]retry.HoldEvent // per scope, the start not yet ended
	inCall map[string]bool
}

func newHoldLog(t testing.TB, b *retry.Budget) *holdLog {
	l := &holdLog{t: t, budget: b, open: map[string]retry.HoldEvent{}, inCall: map[string]bool{}}
	b.OnHold = l.onHold
	return l
}

func (l *holdLog) onHold(e retry.HoldEvent) {
	l.mu.Lock()
	if l.inCall[e.Scope] {
		l.t.Errorf("two OnHold calls of %q overlap", e.Scope)
	}
	l.inCall[e.Scope] = true
	start, open := l.open[e.Scope]
	switch {
	case !e.Ended && open && !e.Since.Equal(start.Since):
		l.t.Errorf("%q started again before its end", e.Scope)
	case e.Ended && !open:
		l.t.Errorf("%q ended without a start", e.Scope)
	case e.Ended && (!start.Since.Equal(e.Since) || start.Err != e.Err):
		l.t.Errorf("%q's end: Since %v, Err %v; its start's: %v, %v", e.Scope, e.Since, e.Err, start.Since, start.Err)
	}
	if e.Ended {
		delete(l.open, e.Scope)
	} else if !open {
		l.open[e.Scope] = e
	}
	l.events = append(l.events, e)
	l.mu.Unlock()

	if listed(l.budget.Held(), e.Scope) == e.Ended {
		l.t.Errorf("during %q's event (Ended %v), Held lists it: %v", e.Scope, e.Ended, !e.Ended)
	}
	runtime.Gosched() // let an overlapping call show

	l.mu.Lock()
	l.inCall[e.Scope] = false
	l.mu.Unlock()
}

func (l *holdLog) all() []retry.HoldEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]retry.HoldEvent(nil), l.events...)
}

func listed(held []retry.HoldEvent, scope string) bool {
	for _, e := range held {
		if e.Scope == scope {
			return true
		}
	}
	return false
}

// TestHoldEventsOffTheWire: a Budget not on the wire has one scope, "":
// its hold's start and end come once each, the end repeating the start's
// Since and Err and counting the probes and the calls that waited; Held
// lists the hold while it is on.
func TestHoldEventsOffTheWire(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(t0)
	b := newBudget(clk, noRetries, 100*time.Millisecond)
	log := newHoldLog(t, b)
	require.Nil(t, b.Held())

	startHold(t, b)
	held := b.Held()
	require.Len(t, held, 1)
	assert.Equal(t, retry.HoldEvent{Since: t0, Err: errDown}, held[0])
	require.Equal(t, []retry.HoldEvent{{Since: t0, Err: errDown}}, log.all())

	// Two calls wait for the hold; one is refused at once (no context).
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wgGo(&wg, func() {
			err := retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 1}, retry.IsTransient,
				func(context.Context) error { return nil }, retry.WithBudget(b))
			assert.ErrorIs(t, err, retry.ErrBudgetExhausted)
		})
	}
	awaitWaiters(t, clk, 2)
	cancel()
	wg.Wait()
	require.ErrorIs(t, retry.OnError(retry.Backoff{Steps: 1}, retry.IsTransient, func() error { return nil },
		retry.WithBudget(b)), retry.ErrBudgetExhausted)
	assert.Equal(t, 2, b.Held()[0].Waited)

	// A probe that fails, then one that succeeds and ends the hold.
	clk.Step(100 * time.Millisecond)
	require.Error(t, probe(b, errDown))
	assert.Equal(t, 1, b.Held()[0].Probes)
	clk.Step(200 * time.Millisecond)
	require.NoError(t, probe(b, nil))
	assert.Nil(t, b.Held())
	assert.Equal(t, []retry.HoldEvent{
		{Since: t0, Err: errDown},
		{Ended: true, Since: t0, Err: errDown, Probes: 2, Waited: 2},
	}, log.all())
}

// probe makes a call of one attempt that returns err, through b, whose
// probe is due: it goes at once.
func probe(b *retry.Budget, err error) error {
	return retry.OnErrorWithContext(context.Background(), retry.Backoff{Steps: 1}, retry.IsTransient,
		func(context.Context) error { return err }, retry.WithBudget(b))
}

// TestHoldEventsOnTheWire: on the wire each scope has its own events,
// named as the budget's errors name it; a 503's Err names the status, a
// request's error is itself; Held lists the scopes held, oldest first.
func TestHoldEventsOnTheWire(t *testing.T) {
	t.Parallel()
	p := &paths{failing: map[string]wireReply{"secrets": {status: http.StatusServiceUnavailable}}}
	clk, b, rt := scoped(p)
	log := newHoldLog(t, b)
	for range 3 {
		require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL))
	}
	clk.Step(10 * time.Millisecond)
	p.mu.Lock()
	p.failing = map[string]wireReply{"secrets": {status: http.StatusServiceUnavailable}, "apps": {err: errRefused}}
	p.mu.Unlock()
	for range 3 {
		require.ErrorIs(t, roundTrip(t, rt, http.MethodGet, deploymentURL), errRefused)
	}

	held := b.Held()
	require.Len(t, held, 2)
	assert.Equal(t, "writes of secrets", held[0].Scope)
	assert.Equal(t, t0, held[0].Since)
	require.Error(t, held[0].Err)
	assert.Contains(t, held[0].Err.Error(), "503 Service Unavailable")
	assert.Equal(t, server, held[1].Scope)
	assert.Equal(t, t0.Add(10*time.Millisecond), held[1].Since)
	assert.ErrorIs(t, held[1].Err, errRefused)

	// The server's probe gets a 503 for the secret: the server answered
	// (its hold ends), the secret's writes failed (theirs stays).
	p.mu.Lock()
	p.failing = map[string]wireReply{"secrets": {status: http.StatusServiceUnavailable}}
	p.mu.Unlock()
	clk.Step(100 * time.Millisecond)
	require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL))
	held = b.Held()
	require.Len(t, held, 1)
	assert.Equal(t, "writes of secrets", held[0].Scope)

	events := log.all()
	require.Len(t, events, 3)
	assert.Equal(t, retry.HoldEvent{Scope: server, Ended: true, Since: held[0].Since.Add(10 * time.Millisecond),
		Err: events[1].Err, Probes: 1}, events[2])
}

// TestHoldEventsReplacedScope: a held scope that a full table replaces
// ends with an event.
func TestHoldEventsReplacedScope(t *testing.T) {
	t.Parallel()
	p := &paths{failing: map[string]wireReply{"/apis/": {status: http.StatusInternalServerError}}}
	clk, b, rt := scoped(p)
	log := newHoldLog(t, b)
	resource := func(i int) string {
		return fmt.Sprintf("%s/apis/g%d.example/v1/namespaces/default/things/x", server, i)
	}
	for range 3 {
		require.NoError(t, roundTrip(t, rt, http.MethodGet, resource(0)))
	}
	require.Len(t, log.all(), 1)
	clk.Step(time.Millisecond)
	// The table keeps at most 512 scopes: these fill it, within 10*Hold.
	for i := 1; i < 512; i++ {
		require.NoError(t, roundTrip(t, rt, http.MethodGet, resource(i)))
	}
	require.Len(t, log.all(), 1, "the held scope is replaced before the table is full")
	clk.Step(time.Millisecond)
	require.NoError(t, roundTrip(t, rt, http.MethodGet, resource(512)))
	events := log.all()
	require.Len(t, events, 2)
	assert.Equal(t, retry.HoldEvent{Scope: "reads of things.g0.example", Ended: true, Since: t0, Err: events[0].Err}, events[1])
	assert.Nil(t, b.Held())
}

// TestHoldEventsPanickingOnHold: a panic in OnHold goes to the goroutine
// whose call started or ended the hold; the hold goes on as if OnHold had
// returned, and its end still comes.
func TestHoldEventsPanickingOnHold(t *testing.T) {
	t.Parallel()
	t.Run("off the wire", func(t *testing.T) {
		t.Parallel()
		clk := testingclock.NewFakeClock(t0)
		b := newBudget(clk, noRetries, 100*time.Millisecond)
		var ends []retry.HoldEvent
		b.OnHold = func(e retry.HoldEvent) {
			if !e.Ended {
				panic("OnHold's own")
			}
			ends = append(ends, e)
		}
		require.PanicsWithValue(t, "OnHold's own", func() { startHold(t, b) })
		require.Len(t, b.Held(), 1)
		require.ErrorIs(t, retry.OnError(retry.Backoff{Steps: 1}, retry.IsTransient, func() error { return nil },
			retry.WithBudget(b)), retry.ErrBudgetExhausted, "the hold is off after the panic")
		clk.Step(100 * time.Millisecond)
		require.NoError(t, probe(b, nil))
		assert.Nil(t, b.Held())
		assert.Equal(t, []retry.HoldEvent{{Ended: true, Since: t0, Err: errDown, Probes: 1, Waited: 0}}, ends)
		assert.Equal(t, retry.BudgetStats{FirstAttempts: 2, Refused: 2, Probes: 1}, b.Stats())
	})
	t.Run("on the wire", func(t *testing.T) {
		t.Parallel()
		p := &paths{failing: map[string]wireReply{"secrets": {status: http.StatusServiceUnavailable}}}
		clk, b, rt := scoped(p)
		b.OnHold = func(e retry.HoldEvent) { panic(e) }
		require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL))
		require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL))
		var got any
		func() {
			defer func() { got = recover() }()
			_ = roundTrip(t, rt, http.MethodPut, secretURL)
		}()
		require.IsType(t, retry.HoldEvent{}, got)
		assert.Equal(t, "writes of secrets", got.(retry.HoldEvent).Scope)
		require.Len(t, b.Held(), 1)
		p.mu.Lock()
		p.failing = nil
		p.mu.Unlock()
		clk.Step(100 * time.Millisecond)
		require.PanicsWithValue(t, retry.HoldEvent{Scope: "writes of secrets", Ended: true, Since: t0,
			Err: got.(retry.HoldEvent).Err, Probes: 1}, func() { _ = roundTrip(t, rt, http.MethodPut, secretURL) })
		assert.Nil(t, b.Held())
		require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL), "the budget works on after the panics")
	})
}

// TestHoldEventsConcurrent: 16 callers start and end holds at random, on
// the wire (4 resources) and off it, the clock moving under them; each
// scope's events alternate, never overlap, and every hold that started
// ends once the failures stop (holdLog checks each call; run with -race).
func TestHoldEventsConcurrent(t *testing.T) {
	t.Parallel()
	const callers, calls = 16, 300
	for _, onWire := range []bool{false, true} {
		t.Run(fmt.Sprintf("on the wire %v", onWire), func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(t0)
			b := newBudget(clk, noRetries, 100*time.Millisecond)
			log := newHoldLog(t, b)
			var mu sync.Mutex
			failing := map[int]bool{}
			isFailing := func(i int) bool {
				mu.Lock()
				defer mu.Unlock()
				return failing[i]
			}
			url := func(i int) string {
				return fmt.Sprintf("%s/api/v1/namespaces/default/res%d/x", server, i)
			}
			var rt http.RoundTripper
			if onWire {
				rt = b.WrapTransport(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
					var i int
					_, _ = fmt.Sscanf(req.URL.Path, "/api/v1/namespaces/default/res%d/x", &i)
					status := http.StatusOK
					if isFailing(i) {
						status = http.StatusServiceUnavailable
					}
					return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
				}))
			}
			done, cancel := context.WithCancel(context.Background())
			cancel() // a request that a hold keeps waiting returns at once
			call := func(i int) {
				if !onWire {
					// A loop checks its context first: this one ends
					// within a millisecond, the wait of a held call.
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					defer cancel()
					_ = retry.OnErrorWithContext(ctx, retry.Backoff{Steps: 2}, retry.IsTransient, func(context.Context) error {
						if isFailing(i) {
							return errDown
						}
						return nil
					}, retry.WithBudget(b), retry.WithSleeper(&fakeSleeper{}))
					return
				}
				resp, err := rt.RoundTrip(request(t, done, http.MethodGet, url(i)))
				if err == nil {
					_ = resp.Body.Close()
				}
			}
			var wg sync.WaitGroup
			for c := range callers {
				wgGo(&wg, func() {
					r := rand.New(rand.NewPCG(uint64(c), 7))
					for range calls {
						i := r.IntN(4)
						switch r.IntN(8) {
						case 0:
							mu.Lock()
							failing[i] = !failing[i]
							mu.Unlock()
						case 1:
							clk.Step(100 * time.Millisecond)
						}
						call(i)
					}
				})
			}
			wg.Wait()

			mu.Lock()
			clear(failing)
			mu.Unlock()
			for range 20 {
				if b.Held() == nil {
					break
				}
				clk.Step(time.Second)
				for i := range 4 {
					call(i)
				}
			}
			require.Nil(t, b.Held(), "holds left once nothing fails")
			starts, ends := 0, 0
			for _, e := range log.all() {
				if e.Ended {
					ends++
				} else {
					starts++
				}
			}
			t.Logf("%d holds started and ended", starts)
			assert.Positive(t, starts, "no hold started: the test tests nothing")
			assert.Equal(t, starts, ends)
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestHeldNil: a nil Budget holds nothing.
func TestHeldNil(t *testing.T) {
	t.Parallel()
	var b *retry.Budget
	assert.Nil(t, b.Held())
}

// TestHoldEventsAllocations: with OnHold set, a call or a request
// allocates nothing while no scope is held, off the wire and on it (a
// scope that failed once and is not held included).
func TestHoldEventsAllocations(t *testing.T) {
	// Not parallel: AllocsPerRun counts every goroutine's allocations.
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	off := retry.NewBudget()
	off.OnHold = func(retry.HoldEvent) { t.Error("a hold started") }
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = retry.OnErrorWithContext(ctx, retry.DefaultRetry, retry.IsTransient, ok, retry.WithBudget(off))
	}), "off the wire")

	on := retry.NewBudget()
	on.OnHold = off.OnHold
	p := &paths{failing: map[string]wireReply{"secrets": {status: http.StatusServiceUnavailable}}}
	rt := on.WrapTransport(p)
	require.NoError(t, roundTrip(t, rt, http.MethodPut, secretURL)) // a 503: the scope fails once
	healthy := on.WrapTransport(benchWire)
	req := request(t, ctx, http.MethodGet, deploymentURL)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = healthy.RoundTrip(req) }), "on the wire")
	assert.Nil(t, on.Held())
}
