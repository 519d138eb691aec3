package integration_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/ha"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

const (
	// fleetControllers is the number of controller processes of the
	// fleet, each with fleetWorkers workers: as many workers in all as
	// the one controller beside them.
	fleetControllers = 4
	fleetWorkers     = 4
)

// TestFleetOutage runs the outage workload (outage.Workload, caller (a):
// the worker's own loop, a failed key back through the rate limiter) on
// an HA control plane, two kube-apiservers on a three-member etcd behind
// the balancer, as a fleet: fleetControllers controllers of fleetWorkers
// workers each, every one a clientset of its own (its own dialer, so its
// own connections, which the balancer spreads) with NewBudget() on its
// transport; beside them the same fleet without a budget, and one
// controller of as many workers in all with NewBudget() and without. All
// run at the same time, so their outages coincide.
//
// A budget bounds one process, so a fleet's outage load is the sum of its
// processes'. During the outage each controller with NewBudget() must
// send about what the hold's rules give one process whatever its workers
// (holdModel), and no more than its budget's balance adds to that
// (holdBound); the fleet with budgets fewer requests than the fleet
// without. In every run no write may be lost or applied twice, and every
// worker must come back.
func TestFleetOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cp, err := ha.Start(testserver.BufferLogs(t), ha.Options{APIServers: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := cp.Server(0)
	env := &outage.Env{Config: cp.Config(), Client: s.Client, Namespace: createNamespace(t, s, "fleet-")}
	runs := []outage.Run{
		{Caller: outage.LoopQueue, Policy: outage.NoBudget},
		{Caller: outage.LoopQueue, Policy: outage.Ours},
	}
	for _, p := range []outage.Policy{outage.NoBudget, outage.Ours} {
		for range fleetControllers {
			runs = append(runs, outage.Run{Caller: outage.LoopQueue, Policy: p, Workers: fleetWorkers})
		}
	}
	rs, err := env.Run(ctx, outage.Workload, runs)
	if err != nil {
		t.Fatal(err)
	}
	none, one := rs[0], rs[1]
	fleetNone, fleet := rs[2:2+fleetControllers], rs[2+fleetControllers:]

	var table strings.Builder
	if err := outage.WriteTable(&table, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the %v outage through the balancer: one controller of %d workers without and with NewBudget(), then %d controllers of %d without and with:\n%s",
		outage.Workload.Outage, outage.Workload.Workers, fleetControllers, fleetWorkers, table.String())
	sum := func(rs []*outage.Result) (n int) {
		for _, r := range rs {
			n += r.OutageRequests()
		}
		return n
	}
	// The probes' waits are drawn from half to all of each interval:
	// fewest probes with whole ones, most with halves.
	model := holdModel(retry.NewBudget(), outage.Workload.Outage, 1)
	most := holdModel(retry.NewBudget(), outage.Workload.Outage, 0.5)
	t.Logf("requests during the outage: one controller of %d workers %d with NewBudget(), %d without; "+
		"the fleet of %d controllers of %d %d with (%.1f a controller; the hold's rules: %d to %d), %d without (%.1f a controller)",
		outage.Workload.Workers, one.OutageRequests(), none.OutageRequests(),
		fleetControllers, fleetWorkers, sum(fleet), float64(sum(fleet))/fleetControllers, model, most,
		sum(fleetNone), float64(sum(fleetNone))/fleetControllers)

	for _, r := range rs {
		for _, problem := range r.Integrity() {
			t.Errorf("%s, %d workers: %s", r.Policy, r.Sched.Workers, problem)
		}
		if _, ok := r.Recovery(); !ok {
			t.Errorf("%s, %d workers: not every worker came back after the outage: %s", r.Policy, r.Sched.Workers, r.Recovered())
		}
		if r.Policy == outage.NoBudget.Name && r.OutageRequests() == 0 {
			t.Errorf("no budget, %d workers: no request during the outage: the outage did not bite", r.Sched.Workers)
		}
	}
	for _, r := range append([]*outage.Result{one}, fleet...) {
		// The failures that start the hold may be of requests sent just
		// before the outage began, and its last probe may fall after it.
		if n, lo, hi := r.OutageRequests(), model-4, holdBound(r, most); n < lo || n > hi {
			t.Errorf("NewBudget(), %d workers: %d requests during the outage, want %d to %d (the hold's rules give %d to %d a process; budget during it %+v)",
				r.Sched.Workers, n, lo, hi, model, most, r.BudgetDelta(outage.During, outage.After))
		}
	}
	if sum(fleet) >= sum(fleetNone) {
		t.Errorf("the fleet sent %d requests during the outage with NewBudget(), not fewer than the %d without", sum(fleet), sum(fleetNone))
	}
}

// holdBound is the most a process with NewBudget() may send during the
// outage: holdModel's model, and, before the hold starts, a failed call of
// every worker (one first attempt each), and the budget may grant the retries its
// balance holds when the outage begins: Ratio times the requests of the
// last Window before it, and the floor, MinPerSecond for a Window.
func holdBound(r *outage.Result, model int) int {
	b := retry.NewBudget()
	rate := float64(r.PhaseRequests(outage.Before)) / outage.Workload.Before.Seconds()
	balance := b.Ratio*rate*b.Window.Seconds() + b.MinPerSecond*b.Window.Seconds()
	return model + r.Sched.Workers + int(math.Ceil(balance))
}

// holdModel is what one process with budget b sends during an outage of
// d in which every request fails at once, by the hold's rules: the 3
// first attempts whose failures start the hold, then one probe at a time,
// each part of an interval (f: its share, from 0.5 to 1) after the
// previous one or the start, the interval doubling from Hold to at most
// 5 x Hold or 1s. It does not depend on the number of workers: what a
// fleet sends grows with its processes.
func holdModel(b *retry.Budget, d time.Duration, f float64) int {
	limit := max(min(5*b.Hold, time.Second), b.Hold)
	wait := func(interval time.Duration) time.Duration { return time.Duration(f * float64(interval)) }
	n := 3
	for at, interval := wait(b.Hold), b.Hold; at < d; at += wait(interval) {
		n++
		interval = min(2*interval, limit)
	}
	return n
}
