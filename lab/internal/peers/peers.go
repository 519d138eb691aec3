// Package peers holds the policies that make outages sets beside this
// library's Budget: gRPC's retry throttling (A6), failsafe-go's retry
// budget and its adaptive throttler, and the Budget without its hold, as
// outage.Policy values that each give a run a state of its own.
package peers

import (
	"context"
	"net/http"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/outage"
)

// NoHold is the third revision's budget: NewBudget()'s Ratio,
// MinPerSecond and Window with Hold 0 (first attempts never held),
// charged on the wire in the same place as outage.Ours, so that only the
// hold differs.
func NoHold() outage.Policy {
	return outage.BudgetPolicy("budget, Hold 0", func() *retry.Budget {
		b := retry.NewBudget()
		b.Hold = 0
		return b
	})
}

// GRPC is gRPC's retry throttling (A6) with maxTokens 10 and tokenRatio
// 0.1, on the wire: every request's outcome moves the tokens, and every
// request of a call after one of its requests failed (client-go's own
// resends, the loop's later attempts) is a retry, refused while the
// tokens are at most half of maxTokens.
func GRPC() outage.Policy {
	return outage.Policy{Name: "gRPC A6 throttling", New: func() *outage.Instance {
		t := newA6Throttle(10, 0.1)
		return &outage.Instance{Wrap: t.transport, CallContext: withA6Call}
	}}
}

// FailsafeBudget is failsafe-go's retry budget with its defaults
// (budget.New(): max rate 0.2, min concurrency 3). It bounds the retries
// of failsafe-go's own RetryPolicy only, so that policy replaces the
// workers' loop (FailsafeBudgetLoop); a plain Update has no retries for
// it to bound.
func FailsafeBudget() outage.Policy {
	return outage.Policy{Name: "failsafe-go budget", New: func() *outage.Instance {
		return &outage.Instance{Loop: FailsafeBudgetLoop()}
	}}
}

// FailsafeBudgetLoop returns a loop of failsafe-go's RetryPolicy shaped
// as the workers' own (outage.LoopBackoff's attempts, delay and jitter,
// on retry.IsTransient) with a retry budget of its own (budget.New()),
// which every call of the loop shares.
func FailsafeBudgetLoop() func(ctx context.Context, fn func(context.Context) error) error {
	rp := retrypolicy.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return retry.IsTransient(err) }).
		WithMaxRetries(outage.LoopBackoff.Steps - 1).
		WithDelay(outage.LoopBackoff.Duration).
		WithJitterFactor(outage.LoopBackoff.Jitter).
		ReturnLastFailure().
		WithBudget(budget.New()).
		Build()
	return func(ctx context.Context, fn func(context.Context) error) error {
		_, err := failsafe.With[any](rp).WithContext(ctx).
			GetWithExecution(func(exec failsafe.Execution[any]) (any, error) {
				return nil, fn(exec.Context())
			})
		return err
	}
}

// FailsafeThrottler is failsafe-go's adaptive throttler with its
// defaults (NewWithDefaults: failure rate threshold 0.1 over 1 minute, at
// most 0.9 of executions rejected) on the wire
// (failsafehttp.NewRoundTripper): every request, first attempts
// included, may be rejected.
func FailsafeThrottler() outage.Policy {
	return outage.Policy{Name: "failsafe-go adaptive throttler", New: func() *outage.Instance {
		return &outage.Instance{Wrap: FailsafeThrottlerTransport()}
	}}
}

// FailsafeThrottlerTransport returns a wrapper of a transport through a
// new adaptive throttler with failsafe-go's defaults.
func FailsafeThrottlerTransport() func(http.RoundTripper) http.RoundTripper {
	th := adaptivethrottler.NewWithDefaults[*http.Response]()
	return func(rt http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(rt, th)
	}
}

// All are the policies side by side in the full outage, in the order of
// the table: outage.NoBudget, NoHold, GRPC, FailsafeBudget,
// FailsafeThrottler and outage.Ours.
func All() []outage.Policy {
	return []outage.Policy{outage.NoBudget, NoHold(), GRPC(), FailsafeBudget(), FailsafeThrottler(), outage.Ours}
}
