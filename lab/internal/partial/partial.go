// Package partial runs the partial-failure round of make outages: one
// API group down (an aggregated API whose Service has no endpoints, which
// the aggregator answers with 503) while the rest of the server is
// healthy, and, for each policy at once, a controller whose healthy
// workers update ConfigMaps of their own while its failing workers call
// the group that is down. It records what the healthy calls got (goodput,
// latency) and what the failing group was sent.
package partial

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/aggregated"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// Group is the API group that is down, and Version its version.
const (
	Group   = "outages.kuberetry.test"
	Version = "v1alpha1"
	// resource is what the failing workers list; the request counter
	// tells their requests apart by it.
	resource = "widgets"
)

// Schedule is the shape of the round.
type Schedule struct {
	// Healthy and Failing are the workers of each controller: Healthy
	// update a ConfigMap of their own each, Failing list the group that
	// is down.
	Healthy, Failing int
	// Warmup is how long the workers run before the round is counted,
	// Length how long it is counted.
	Warmup, Length time.Duration
	// Pace is how long after a healthy call its worker calls again,
	// Pause how long after a failing call.
	Pace, Pause time.Duration
}

// Workload is the round of make outages: 15 healthy workers, each calling
// again 50ms after its last call ended (a busy controller), and 4
// failing ones, each calling again 100ms after an error; counted for 5s
// after a warm-up of 2s.
var Workload = Schedule{
	Healthy: 15, Failing: 4,
	Warmup: 2 * time.Second, Length: 5 * time.Second,
	Pace: 50 * time.Millisecond, Pause: 100 * time.Millisecond,
}

// Result is what one policy's controller recorded over the counted
// Length.
type Result struct {
	Policy string
	Sched  Schedule
	// Healthy are the latencies of the healthy calls that ended in the
	// counted window and returned nil; HealthyFailed counts those that
	// returned an error.
	Healthy       []time.Duration
	HealthyFailed int
	// FailingRequests is the requests sent to the group that is down
	// in the counted window, client-go's own resends included.
	FailingRequests int
	// Budget is what the policy's Budget counted in the window, for a
	// policy with one (HasBudget).
	Budget    retry.BudgetStats
	HasBudget bool
	// FirstHealthyErr is the first error of a healthy call, or nil.
	FirstHealthyErr error
}

// Goodput returns the healthy calls that succeeded per second.
func (r *Result) Goodput() float64 { return float64(len(r.Healthy)) / r.Sched.Length.Seconds() }

// Percentile returns the nearest-rank p-th percentile of the successful
// healthy calls' latency.
func (r *Result) Percentile(p int) time.Duration {
	sorted := slices.Clone(r.Healthy)
	slices.Sort(sorted)
	return contention.Percentile(sorted, p)
}

// Baseline returns the result in rs without a budget, or nil.
func Baseline(rs []*Result) *Result {
	for _, r := range rs {
		if r.Policy == outage.NoBudget.Name {
			return r
		}
	}
	return nil
}

// Env is where the round runs: a kube-apiserver and a namespace on it.
type Env struct {
	// Config is the server's client config; each policy's controller
	// has a client and connections of its own.
	Config *rest.Config
	// Client reaches the server directly, for setup.
	Client    kubernetes.Interface
	Namespace string
}

// TakeDown registers Group/Version as an aggregated API served by a
// Service of e's namespace with no endpoints, and waits until the
// aggregator answers 503 for it. The returned function deletes the
// registration and the Service.
func (e *Env) TakeDown(ctx context.Context) (restore func(context.Context) error, err error) {
	down, err := aggregated.TakeDown(ctx, e.Config, aggregated.API{
		Group: Group, Version: Version,
		Namespace: e.Namespace, Service: "unreachable-aggregated-api",
		Probe: path(e.Namespace), Timeout: time.Minute,
	})
	if err != nil {
		return nil, err
	}
	return down.Restore, nil
}

// path is the failing workers' request: a list in the group that is
// down.
func path(ns string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s", Group, Version, ns, resource)
}

// Run runs one controller per policy at the same time, each with a
// client, connections and ConfigMaps of its own, against the group that
// TakeDown took down, and returns what each recorded.
func (e *Env) Run(ctx context.Context, sched Schedule, policies []outage.Policy) ([]*Result, error) {
	cs := make([]*controller, len(policies))
	for i, p := range policies {
		c, err := e.newController(ctx, sched, p, i)
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, c := range cs {
		c.start(runCtx, &wg)
	}
	poll.Sleep(ctx, sched.Warmup)
	for _, c := range cs {
		c.mark(true)
	}
	poll.Sleep(ctx, sched.Length)
	for _, c := range cs {
		c.mark(false)
	}
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*Result, len(cs))
	for i, c := range cs {
		out[i] = c.res
	}
	return out, nil
}

// controller is one policy's controller in the round.
type controller struct {
	sched Schedule
	inst  *outage.Instance
	wire  *reqcount.Counter
	cs    kubernetes.Interface
	rc    rest.Interface
	ns    string
	names []string // the healthy workers' ConfigMaps

	mu       sync.Mutex
	counting bool
	before   reqcount.Counts
	budget   retry.BudgetStats
	res      *Result
}

func (e *Env) newController(ctx context.Context, sched Schedule, p outage.Policy, n int) (*controller, error) {
	c := &controller{sched: sched, inst: p.New(), wire: &reqcount.Counter{}, ns: e.Namespace,
		res: &Result{Policy: p.Name, Sched: sched}}
	c.res.HasBudget = c.inst.Budget != nil
	for w := range sched.Healthy {
		name := fmt.Sprintf("partial-%d-w%02d", n, w)
		if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create configmap: %w", err)
		}
		c.names = append(c.names, name)
	}
	cs, err := kubernetes.NewForConfig(c.inst.Config(e.Config, c.wire))
	if err != nil {
		return nil, err
	}
	c.cs, c.rc = cs, cs.CoreV1().RESTClient()
	return c, nil
}

// mark starts (start true) or ends the counted window.
func (c *controller) mark(start bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var stats retry.BudgetStats
	if c.inst.Budget != nil {
		stats = c.inst.Budget.Stats()
	}
	if start {
		c.counting, c.before, c.budget = true, c.wire.Snapshot(), stats
		return
	}
	c.counting = false
	c.res.FailingRequests = c.wire.Snapshot().Sub(c.before).Resource(resource)
	c.res.Budget = outage.StatsDelta(c.budget, stats)
}

func (c *controller) start(ctx context.Context, wg *sync.WaitGroup) {
	for w := range c.sched.Healthy {
		wg.Go(func() { c.loop(ctx, c.healthy(w), c.sched.Pace, c.sched.Pace, true) })
	}
	for range c.sched.Failing {
		wg.Go(func() { c.loop(ctx, c.failing, c.sched.Pace, c.sched.Pause, false) })
	}
}

// loop calls fn, through the policy, until ctx ends: again pace after a
// success, pause after an error.
func (c *controller) loop(ctx context.Context, fn func(context.Context) error, pace, pause time.Duration, healthy bool) {
	for ctx.Err() == nil {
		start := time.Now()
		err := c.inst.Do(ctx, fn)
		took := time.Since(start)
		if healthy && ctx.Err() == nil {
			c.mu.Lock()
			if c.counting {
				if err == nil {
					c.res.Healthy = append(c.res.Healthy, took)
				} else {
					c.res.HealthyFailed++
					if c.res.FirstHealthyErr == nil {
						c.res.FirstHealthyErr = err
					}
				}
			}
			c.mu.Unlock()
		}
		if err == nil {
			poll.Sleep(ctx, pace)
		} else {
			poll.Sleep(ctx, pause)
		}
	}
}

// healthy returns worker w's call: its ConfigMap updated with a
// counter, read first (a built object), through the typed clientset.
func (c *controller) healthy(w int) func(context.Context) error {
	cms := c.cs.CoreV1().ConfigMaps(c.ns)
	name := c.names[w]
	n := 0
	return func(ctx context.Context) error {
		n++
		_, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, nil,
			func(ctx context.Context) (*corev1.ConfigMap, error) { return cms.Get(ctx, name, metav1.GetOptions{}) },
			func(cm *corev1.ConfigMap) error {
				cm.Data = map[string]string{"n": fmt.Sprint(n)}
				return nil
			},
			func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				return cms.Update(ctx, cm, metav1.UpdateOptions{})
			})
		return err
	}
}

// failing is a failing worker's call: a list in the group that is down.
func (c *controller) failing(ctx context.Context) error {
	return c.rc.Get().AbsPath(path(c.ns)).Do(ctx).Error()
}
