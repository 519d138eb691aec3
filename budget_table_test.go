package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// resourceNamed is a resource scope of server https://h for the test.
func resourceNamed(name string) scope {
	return scope{kind: resourceScope, scheme: "https", host: "h", resource: name}
}

// failThrice makes s fail three first attempts at clk's time: its hold
// starts.
func failThrice(table *holdTable, clk *testingclock.FakeClock, timing holdTiming, s scope) {
	for range holdFailures {
		table.record(true, 0, timeSource{clk}, timing, observation{scope: s, out: failedTransiently})
	}
}

// TestHoldTableBounded: the table keeps at most maxScopes scopes; when it
// is full a new failing scope first makes it forget the scopes neither
// held nor failed within 10*Hold, then replaces the one whose last failure
// is the oldest, ending its hold (its waiters go).
func TestHoldTableBounded(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(holdStart)
	timing := newHoldTiming(100*time.Millisecond, fullInterval)
	ts := timeSource{clk}
	var table holdTable

	oldest := resourceNamed("oldest")
	failThrice(&table, clk, timing, oldest)
	_, released := table.scopes[oldest], table.scopes[oldest].released
	for i := 1; i < maxScopes; i++ {
		clk.Step(time.Millisecond)
		failThrice(&table, clk, timing, resourceNamed(fmt.Sprint(i)))
	}
	if len(table.scopes) != maxScopes {
		t.Fatalf("%d scopes, want %d", len(table.scopes), maxScopes)
	}
	clk.Step(time.Millisecond)
	newcomer := resourceNamed("new")
	table.record(true, 0, ts, timing, observation{scope: newcomer, out: failedTransiently})
	if len(table.scopes) != maxScopes || table.scopes[oldest] != nil || table.scopes[newcomer] == nil {
		t.Fatalf("the full table did not replace the oldest failure by the new one (%d scopes)", len(table.scopes))
	}
	select {
	case <-released:
	default:
		t.Fatal("the replaced scope's hold did not end")
	}

	// Scopes with a failure or two and no hold, older than 10*Hold, are
	// forgotten first, all of them.
	var fresh holdTable
	for i := range maxScopes {
		fresh.record(true, 0, ts, timing, observation{scope: resourceNamed(fmt.Sprint(i)), out: failedTransiently})
	}
	held := resourceNamed("held")
	fresh.scopes[resourceNamed("0")].start(clk.Now(), timing) // an old scope, but held
	clk.Step(timing.span)
	fresh.record(true, 0, ts, timing, observation{scope: held, out: failedTransiently})
	if len(fresh.scopes) != 2 || fresh.scopes[resourceNamed("0")] == nil || fresh.scopes[held] == nil {
		t.Errorf("%d scopes kept, want the held one and the new one", len(fresh.scopes))
	}
}

// TestHoldTableForgetsOnSuccess: a scope's success ends its hold and
// forgets it; a scope that never failed is never kept.
func TestHoldTableForgetsOnSuccess(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(holdStart)
	timing := newHoldTiming(100*time.Millisecond, fullInterval)
	ts := timeSource{clk}
	var table holdTable
	a, b := resourceNamed("a"), resourceNamed("b")
	table.record(true, 0, ts, timing, observation{scope: b, out: answered})
	if len(table.scopes) != 0 {
		t.Fatal("a success added a scope")
	}
	failThrice(&table, clk, timing, a)
	if h := table.scopes[a]; h == nil || !h.on {
		t.Fatal("three failed first attempts did not start the hold")
	}
	released := table.scopes[a].released
	table.record(false, 0, ts, timing, observation{scope: a, out: answered})
	if len(table.scopes) != 0 {
		t.Error("the success kept the scope")
	}
	select {
	case <-released:
	default:
		t.Error("the success did not end the hold")
	}
}

// TestHoldTableWaitsForTheServerFirst: a request whose server and
// resource are both held waits for the server's hold, and may go as the
// server's probe; a request that cannot wait is refused at once, naming
// the scope.
func TestHoldTableWaitsForTheServerFirst(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(holdStart)
	timing := newHoldTiming(100*time.Millisecond, fullInterval)
	ts := timeSource{clk}
	var table holdTable
	server := scope{kind: serverScope, scheme: "https", host: "h:6443"}
	resource := resourceNamed("secrets")
	resource.write = true
	failThrice(&table, clk, timing, resource)
	clk.Step(50 * time.Millisecond)
	failThrice(&table, clk, timing, server)

	_, err := table.pass(context.Background(), false, ts, timing, server, resource)
	var held *heldError
	if !errors.As(err, &held) || held.scope != server || !errors.Is(err, ErrBudgetExhausted) ||
		err.Error() != "retry: retry budget exhausted: https://h:6443 is held, and a call without a context cannot wait" {
		t.Fatalf("admit without a wait: %v, want the server's hold", err)
	}
	// At 100ms the resource's probe is due, the server's not: the
	// request waits for the server's.
	clk.Step(50 * time.Millisecond)
	got := make(chan uint64, 1)
	go func() {
		probe, _ := table.pass(context.Background(), true, ts, timing, server, resource)
		got <- probe
	}()
	for !clk.HasWaiters() {
		time.Sleep(20 * time.Microsecond)
	}
	clk.Step(50 * time.Millisecond) // the server's probe is due
	probe := <-got
	if h := table.scopes[server]; probe == 0 || h.probe != probe {
		t.Fatalf("probe %d, want the server's", probe)
	}
	if h := table.scopes[resource]; h.probe != 0 {
		t.Error("the resource's probe slot was taken too")
	}
}
