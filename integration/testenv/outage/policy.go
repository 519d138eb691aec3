package outage

import (
	"context"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// Policy is what bounds the load of a run.
type Policy struct {
	Name string
	// New returns a fresh state of the policy for one run (a budget of
	// its own).
	New func() *Instance
}

// Instance is one run's state of a Policy, and where it acts. The zero
// Instance bounds nothing.
type Instance struct {
	// Wrap, if not nil, wraps the workers' transport, outside the
	// request counter (rest.Config.Wrap).
	Wrap func(http.RoundTripper) http.RoundTripper
	// Budget is the run's Budget, for its Stats; nil for a peer.
	Budget *retry.Budget
	// Loop, if not nil, replaces the workers' own loop for the callers
	// that have one.
	Loop func(ctx context.Context, fn func(context.Context) error) error
	// CallContext, if not nil, marks the context of each call.
	CallContext func(context.Context) context.Context
}

// Config returns a copy of base for the clients of one controller
// process under the policy: every request counted by wire, below Wrap, so
// a request the policy refuses or holds is not counted; no client-side
// rate limit (client-go's own retries stay at their default); and a
// dialer of its own, so client-go's transport cache gives the process a
// transport and connections of its own.
func (i *Instance) Config(base *rest.Config, wire *reqcount.Counter) *rest.Config {
	cfg := wire.Config(base)
	cfg.QPS, cfg.Burst = 1000, 10000
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext
	if i.Wrap != nil {
		cfg.Wrap(i.Wrap)
	}
	return cfg
}

// Do makes fn one call of a worker: in the policy's loop, or else the
// workers' own (OnErrorWithContext with LoopBackoff, on IsTransient),
// with the policy's CallContext.
func (i *Instance) Do(ctx context.Context, fn func(context.Context) error) error {
	return i.loop(i.callContext(ctx), fn)
}

// loop runs fn in the policy's loop or the workers' own.
func (i *Instance) loop(ctx context.Context, fn func(context.Context) error) error {
	if i.Loop != nil {
		return i.Loop(ctx, fn)
	}
	return retry.OnErrorWithContext(ctx, LoopBackoff, retry.IsTransient, fn)
}

func (i *Instance) callContext(ctx context.Context) context.Context {
	if i.CallContext == nil {
		return ctx
	}
	return i.CallContext(ctx)
}

var (
	// NoBudget bounds nothing.
	NoBudget = Policy{Name: "no budget", New: func() *Instance { return &Instance{} }}
	// Ours is NewBudget() on the wire (cfg.Wrap(budget.WrapTransport)):
	// the caller writes nothing else.
	Ours = BudgetPolicy("NewBudget()", retry.NewBudget)
)

// BudgetPolicy is a Budget from newBudget (one for each run) on the
// wire, cfg.Wrap(budget.WrapTransport), and nowhere else.
func BudgetPolicy(name string, newBudget func() *retry.Budget) Policy {
	return Policy{Name: name, New: func() *Instance {
		b := newBudget()
		return &Instance{Wrap: b.WrapTransport, Budget: b}
	}}
}

// typedUpdate is the workers' write: Update with the typed client, from
// current, the object stored last (a PUT, then a read and a PUT after a
// Conflict), or, when it is nil, on the object named (no resourceVersion),
// so each attempt reads and then writes.
func typedUpdate(ctx context.Context, c corev1client.ConfigMapInterface, name string, current *corev1.ConfigMap, mutate func(*corev1.ConfigMap) error) (*corev1.ConfigMap, error) {
	get := func(ctx context.Context) (*corev1.ConfigMap, error) { return c.Get(ctx, name, metav1.GetOptions{}) }
	update := func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		return c.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return retry.UpdateOnConflict(ctx, conflictBackoff, current, get, mutate, update)
}
