package integration_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
)

// TestOutageTyped is the outage test with typed clients: 16
// workers of one controller, each writing a ConfigMap of its own with
// Update through a typed clientset (client-go's own retries at their
// default), 3s healthy, 5s in which the proxy resets every connection,
// then healthy. Each of the three callers (the worker's own loop with the
// rate limiter, the same loop with a 100ms pause, a plain Update with a
// 100ms pause) runs once with NewBudget() on the wire
// (cfg.Wrap(budget.WrapTransport)) and once without a budget, all six at
// the same time so their outages coincide. For NewBudget() it asserts,
// for each caller: fewer requests during the outage than without a
// budget; the hold held calls, and no call failed without sending a
// request; no refusal before the outage. The targets (at most
// 0.10x the requests, every worker back within 1s, no refusal after the
// outage) are not met yet: they are reported, and asserted with
// KUBERETRY_OUTAGE_TARGETS=1 (see target). For every run: no write lost or
// applied twice.
func TestOutageTyped(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := startServer(t)
	env := &outage.Env{Config: s.Config, Client: s.Client, Namespace: createNamespace(t, s, "outage-typed-")}
	var runs []outage.Run
	for _, c := range outage.Callers {
		runs = append(runs, outage.Run{Caller: c, Policy: outage.NoBudget}, outage.Run{Caller: c, Policy: outage.Ours})
	}
	rs, err := env.Run(ctx, outage.Workload, runs)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := outage.WriteTable(&table, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the %v outage, typed clients:\n%s", outage.Workload.Outage, table.String())
	for _, r := range rs {
		t.Logf("\n%s", r)
	}

	for _, r := range rs {
		for _, problem := range r.Integrity() {
			t.Errorf("%s, %s: %s", r.Caller, r.Policy, problem)
		}
		if r.Policy != outage.Ours.Name {
			continue
		}
		checkOursThroughOutage(t, rs, r)
	}
}

// targetsEnv set to 1 makes TestOutageTyped assert the targets NewBudget()
// does not meet yet (the requests during the outage at most 0.10x those
// without a budget, every worker back within 1s, no refusal after the
// outage); without it they are reported only. make outages asserts them
// side by side with the peers either way.
const targetsEnv = "KUBERETRY_OUTAGE_TARGETS"

// target reports a missed target: an error when targetsEnv is 1, else a
// line of the log that says it is not met.
func target(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(targetsEnv) == "1" {
		t.Errorf(format, args...)
		return
	}
	t.Logf("target not met (asserted with %s=1): "+format, append([]any{targetsEnv}, args...)...)
}

// checkOursThroughOutage checks a NewBudget() run: fewer requests during
// the outage than without a budget, calls held and none failed unsent, no
// refusal before the outage, always; the targets through target.
func checkOursThroughOutage(t *testing.T, rs []*outage.Result, r *outage.Result) {
	t.Helper()
	name := r.Caller.String()
	if ratio := outage.Ratio(rs, r); ratio > 0.10 || outage.Baseline(rs, r).OutageRequests() == 0 {
		target(t, "%s: %d requests during the outage, %.2fx the %d without a budget; want at most 0.10x",
			name, r.OutageRequests(), ratio, outage.Baseline(rs, r).OutageRequests())
	}
	if base := outage.Baseline(rs, r).OutageRequests(); r.OutageRequests() >= base {
		t.Errorf("%s: %d requests during the outage, not fewer than the %d without a budget", name, r.OutageRequests(), base)
	}
	next, ok := r.NextCalls()
	for w := range next {
		switch {
		case !ok[w]:
			t.Errorf("%s: worker %d made no call after the outage", name, w)
		case next[w].Err != nil:
			target(t, "%s: worker %d's next call after the outage failed %v after it: %v",
				name, w, (next[w].End - r.Bounds[outage.After]).Round(time.Millisecond), next[w].Err)
		}
	}
	if d, ok := r.Recovery(); !ok || d > time.Second {
		target(t, "%s: every worker back %s after the outage, want within 1s; the last one's calls around the end:\n%s",
			name, r.Recovered(), r.LastBack())
	}
	if d := r.BudgetDelta(outage.During, outage.After); d.Held == 0 {
		t.Errorf("%s: no call was held during the outage (budget during it: %+v)", name, d)
	}
	for i, c := range r.UnsentFailures() {
		if i < 5 {
			t.Errorf("%s: worker %d's call %s (%v to %v) failed without sending a request: %v", name, c.Worker, c.Key(), c.Start, c.End, c.Err)
		}
	}
	if d := r.BudgetDelta(outage.Before, outage.During); d.Refused > 0 {
		t.Errorf("%s: %d refusals while the server was healthy, before the outage", name, d.Refused)
	}
	if d := r.BudgetDelta(outage.After, 3); d.Refused > 0 {
		target(t, "%s: %d refusals while the server was healthy, after the outage", name, d.Refused)
	}
	refusedCalls := 0
	for _, c := range r.Calls {
		if c.End < r.Bounds[outage.During] && errors.Is(c.Err, retry.ErrBudgetExhausted) {
			refusedCalls++
		}
	}
	if refusedCalls > 0 {
		t.Errorf("%s: %d calls refused before the outage", name, refusedCalls)
	}
	t.Logf("%s: budget before the outage %+v, during it %+v, after it %+v", name,
		r.BudgetDelta(outage.Before, outage.During), r.BudgetDelta(outage.During, outage.After), r.BudgetDelta(outage.After, 3))
}
