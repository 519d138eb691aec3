package outage

import (
	"context"
	"net/http"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kuberetry/retry"
)

// Policy is what bounds the load of a run: each run gets a fresh state
// of it (a budget of its own).
type Policy struct {
	Name string
	new  func() *instance
}

// New returns a fresh state of p for one run.
func (p Policy) New() *instance { return p.new() }

// instance is one run's state of a Policy, and where it acts.
type instance struct {
	// wrap, if not nil, wraps the workers' transport, outside the
	// request counter (rest.Config.Wrap).
	wrap func(http.RoundTripper) http.RoundTripper
	// budget is the run's Budget, for its Stats; nil for a peer.
	budget *retry.Budget
	// loopFn, if not nil, replaces the workers' own loop for the callers
	// that have one.
	loopFn func(ctx context.Context, fn func(context.Context) (*corev1.ConfigMap, error)) error
	// callCtx, if not nil, marks the context of each call.
	callCtx func(context.Context) context.Context
}

// loop runs fn in the caller's loop: the workers' own OnErrorValue,
// unless the policy brings a loop of its own.
func (i *instance) loop(ctx context.Context, fn func(context.Context) (*corev1.ConfigMap, error)) error {
	if i.loopFn != nil {
		return i.loopFn(ctx, fn)
	}
	_, err := retry.OnErrorValue(ctx, LoopBackoff, retry.IsTransient, fn)
	return err
}

func (i *instance) callContext(ctx context.Context) context.Context {
	if i.callCtx == nil {
		return ctx
	}
	return i.callCtx(ctx)
}

var (
	// NoBudget bounds nothing.
	NoBudget = Policy{Name: "no budget", new: func() *instance { return &instance{} }}
	// Ours is NewBudget() on the wire (cfg.Wrap(budget.WrapTransport)):
	// the caller writes nothing else.
	Ours = BudgetPolicy("NewBudget()", retry.NewBudget)
	// NoHold is the third revision's budget: NewBudget()'s Ratio,
	// MinPerSecond and Window with Hold 0 (first attempts never held),
	// charged on the wire in the same place as Ours, so that only the
	// hold differs.
	NoHold = BudgetPolicy("budget, Hold 0", func() *retry.Budget {
		b := retry.NewBudget()
		b.Hold = 0
		return b
	})
	// GRPC is gRPC's retry throttling (A6) with maxTokens 10 and
	// tokenRatio 0.1, on the wire: every request's outcome moves the
	// tokens, and every request of a call after one of its requests failed
	// (client-go's own resends, the loop's later attempts) is a retry,
	// refused while the tokens are at most half of maxTokens.
	GRPC = Policy{Name: "gRPC A6 throttling", new: func() *instance {
		t := newA6Throttle(10, 0.1)
		return &instance{wrap: t.transport, callCtx: withA6Call}
	}}
	// FailsafeBudget is failsafe-go's retry budget with its defaults
	// (budget.New(): max rate 0.2, min concurrency 3). It bounds the
	// retries of failsafe-go's own RetryPolicy only, so that policy
	// (the workers' loop: 10 attempts, 10ms apart, jitter 0.1, on
	// IsTransient) replaces the workers' loop; a plain Update has no
	// retries for it to bound.
	FailsafeBudget = Policy{Name: "failsafe-go budget", new: func() *instance {
		rp := retrypolicy.NewBuilder[*corev1.ConfigMap]().
			HandleIf(func(_ *corev1.ConfigMap, err error) bool { return retry.IsTransient(err) }).
			WithMaxRetries(LoopBackoff.Steps - 1).
			WithDelay(LoopBackoff.Duration).
			WithJitterFactor(LoopBackoff.Jitter).
			ReturnLastFailure().
			WithBudget(budget.New()).
			Build()
		return &instance{loopFn: func(ctx context.Context, fn func(context.Context) (*corev1.ConfigMap, error)) error {
			_, err := failsafe.With[*corev1.ConfigMap](rp).WithContext(ctx).
				GetWithExecution(func(exec failsafe.Execution[*corev1.ConfigMap]) (*corev1.ConfigMap, error) {
					return fn(exec.Context())
				})
			return err
		}}
	}}
	// FailsafeThrottler is failsafe-go's adaptive throttler with its
	// defaults (NewWithDefaults: failure rate threshold 0.1 over 1
	// minute, at most 0.9 of executions rejected) on the wire
	// (failsafehttp.NewRoundTripper): every request, first attempts
	// included, may be rejected.
	FailsafeThrottler = Policy{Name: "failsafe-go adaptive throttler", new: func() *instance {
		th := adaptivethrottler.NewWithDefaults[*http.Response]()
		return &instance{wrap: func(rt http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(rt, th)
		}}
	}}
)

// BudgetPolicy is a Budget from newBudget (one for each run) on the
// wire, cfg.Wrap(budget.WrapTransport), and nowhere else.
func BudgetPolicy(name string, newBudget func() *retry.Budget) Policy {
	return Policy{Name: name, new: func() *instance {
		b := newBudget()
		return &instance{wrap: b.WrapTransport, budget: b}
	}}
}

// Peers are the policies side by side, in the order of the table.
var Peers = []Policy{NoBudget, NoHold, GRPC, FailsafeBudget, FailsafeThrottler, Ours}

// typedUpdate is the workers' write: Update with the typed client, on an
// object named by the caller (no resourceVersion), so each attempt reads
// and then writes.
func typedUpdate(ctx context.Context, c corev1client.ConfigMapInterface, name string, mutate func(*corev1.ConfigMap) error) (*corev1.ConfigMap, error) {
	get := func(ctx context.Context) (*corev1.ConfigMap, error) { return c.Get(ctx, name, metav1.GetOptions{}) }
	update := func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		return c.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return retry.UpdateOnConflict(ctx, conflictBackoff, nil, get, mutate, update)
}
