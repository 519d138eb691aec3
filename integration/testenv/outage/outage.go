// Package outage runs the outage workload on a kube-apiserver behind fault
// proxies and records what reached the wire: the workers of one
// controller, each writing an object of its own through a typed clientset
// (client-go's own retries on), through a healthy phase, an outage in
// which every connection is reset, and a healthy phase again. A Policy
// bounds the load (no budget, this library's Budget; the lab module's
// outages command adds the peers: gRPC's retry throttling, failsafe-go's
// budget and adaptive throttler); a Caller is how a worker calls. The
// integration tests assert the figures; the outages command prints and
// plots them.
package outage

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// Schedule is the shape of one run: its workers and its phases.
type Schedule struct {
	// Workers is the number of workers, each writing an object of its own.
	Workers int
	// Warmup is how long the workers run before the healthy phase is
	// counted: a kube-apiserver just started is slow for a few seconds
	// and every client opens its connections.
	Warmup time.Duration
	// Before is the healthy phase before the outage, Outage the outage.
	Before, Outage time.Duration
	// After is the least the healthy phase after the outage lasts; it
	// goes on until every worker is back, for at most AfterMax.
	After, AfterMax time.Duration
	// Pace is how long after a successful call its key comes back.
	Pace time.Duration
	// Pause is how long after a failed call its key comes back, for the
	// callers that do not use the rate limiter.
	Pause time.Duration
	// Spread spreads the first calls of all the runs' workers evenly over
	// this long, as a fleet's processes start at different times; zero
	// starts every worker at once.
	Spread time.Duration
}

// firstCall is when the i-th of n workers makes its first call: i/n of
// Spread after the run's start.
func (s Schedule) firstCall(i, n int) time.Duration {
	return s.Spread * time.Duration(i) / time.Duration(n)
}

// Workload is the outage workload of the tests and of make outages: 16
// workers; after a warm-up of 2s, 3s healthy, 5s of outage, then healthy
// for at least 5s (the goodput window) and until every worker is back (at
// most 20s); each key comes back 100ms after a success, and 100ms after a
// failure for the callers that pause.
var Workload = Schedule{
	Workers: 16, Warmup: 2 * time.Second,
	Before: 3 * time.Second, Outage: 5 * time.Second,
	After: 5 * time.Second, AfterMax: 20 * time.Second,
	Pace: 100 * time.Millisecond, Pause: 100 * time.Millisecond,
}

// GoodputWindow is how long after the outage goodput is counted.
const GoodputWindow = 5 * time.Second

// Caller is how a worker makes a call and requeues its key.
type Caller int

const (
	// LoopQueue makes each call inside the worker's own retry loop
	// (OnErrorValue(IsTransient), LoopBackoff) and sends a failed key
	// back through client-go's workqueue rate limiter.
	LoopQueue Caller = iota
	// LoopPause makes each call inside the same loop; the key comes back
	// Schedule.Pause after any error.
	LoopPause
	// Plain makes a plain Update, with no loop of its own; the key comes
	// back Schedule.Pause after any error.
	Plain
)

// Callers lists every Caller.
var Callers = []Caller{LoopQueue, LoopPause, Plain}

func (c Caller) String() string {
	switch c {
	case LoopQueue:
		return "(a) loop, rate limiter"
	case LoopPause:
		return "(b) loop, 100ms pause"
	case Plain:
		return "(c) plain Update, 100ms pause"
	}
	return "caller " + strconv.Itoa(int(c))
}

// Short is the caller's letter.
func (c Caller) Short() string { return string(rune('a' + int(c))) }

// LoopBackoff is the workers' own loop: an eager one, 10 attempts 10ms
// apart (client-go's DefaultRetry with Steps 10).
var LoopBackoff = retry.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// conflictBackoff retries the Conflicts of Update: only a write that
// landed although its answer was lost makes one here.
var conflictBackoff = retry.DefaultRetry

// Phase is a phase of a run.
type Phase int

const (
	Before Phase = iota
	During
	After
	numPhases
)

func (p Phase) String() string {
	return [...]string{"healthy", "outage", "healthy again"}[p]
}

// Call is one call of a worker: one key added to its ConfigMap.
type Call struct {
	Worker, Seq int
	Start, End  time.Duration // since the run's start
	Err         error
	// Sent reports whether any request of the call reached the
	// transport below every wrapper (a connection was asked for).
	Sent bool
	// Shutdown reports that the run's end cancelled the call.
	Shutdown bool
}

// Key is the ConfigMap key the call adds.
func (c Call) Key() string { return callKey(c.Seq) }

func callKey(seq int) string { return fmt.Sprintf("c%05d", seq) }

// countKey holds the number of calls applied to a ConfigMap.
const countKey = "n"

// Sample is the wire's count at one time of a run.
type Sample struct {
	At       time.Duration
	Requests int // to configmaps, so far
}

// Result is what one run recorded.
type Result struct {
	Caller Caller
	Policy string
	Sched  Schedule

	// Begin is when the run began: Bounds and the Calls' times count
	// from it.
	Begin time.Time
	// Bounds[p] is when phase p began; Bounds[3] the run's end.
	Bounds   [numPhases + 1]time.Duration
	Requests [numPhases + 1]reqcount.Counts
	Proxy    [numPhases + 1]faultproxy.Stats
	// Budget holds the budget's Stats at each bound, for a policy with
	// a Budget (HasBudget).
	Budget    [numPhases + 1]retry.BudgetStats
	HasBudget bool
	Calls     []Call
	Samples   []Sample
	// Data is each worker's ConfigMap's data at the end.
	Data []map[string]string
}

// Run is one run to make: a caller and a policy, and the number of
// workers when not the schedule's.
type Run struct {
	Caller Caller
	Policy Policy
	// Workers, when above 0, replaces the schedule's Workers for this
	// run: one controller of a fleet has fewer.
	Workers int
	// Stored has each worker write from the object its last call stored
	// (a PUT alone, as a controller writing from an informer's fresh copy
	// does), reading it only first and after a Conflict; otherwise each
	// call reads and then writes. client-go resends a read that met a
	// reset connection, 1s later, up to 10 times, and no write: a call
	// that reads first waits in those resends through an outage.
	Stored bool
}

// Env is where runs go: a kube-apiserver, or an HA control plane's
// balancer, and a namespace on it.
type Env struct {
	// Config is the server's (or the balancer's) client config; the runs'
	// clients go through a proxy of their own with its TLS settings.
	Config *rest.Config
	// Client reaches the server directly, for setup and reading back.
	Client    kubernetes.Interface
	Namespace string

	runs atomic.Int64
}

// sampleEvery is how often a run's wire count is sampled for plots.
const sampleEvery = 100 * time.Millisecond

// Run makes runs at the same time, each on ConfigMaps, a proxy and a
// client of its own, so their outages coincide and their healthy phases
// share the server. It returns when every run has ended, or with an
// error of the harness.
func (e *Env) Run(ctx context.Context, sched Schedule, runs []Run) ([]*Result, error) {
	rs := make([]*runner, 0, len(runs))
	defer func() {
		for _, r := range rs {
			r.proxy.Close()
		}
	}()
	for _, run := range runs {
		r, err := e.newRunner(ctx, sched, run)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, r := range rs {
		r.start(ctx, start, &wg, i*sched.Workers, len(rs)*sched.Workers)
	}
	mark := func(p Phase) {
		for _, r := range rs {
			r.mark(p)
		}
	}
	sampled := make(chan struct{})
	sampleCtx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampled)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			for _, r := range rs {
				r.sample()
			}
			select {
			case <-t.C:
			case <-sampleCtx.Done():
				return
			}
		}
	}()

	poll.Sleep(ctx, sched.Warmup)
	mark(Before)
	poll.Sleep(ctx, sched.Before)
	mark(During)
	for _, r := range rs {
		r.proxy.SetOutage(true)
	}
	poll.Sleep(ctx, sched.Outage)
	mark(After)
	for _, r := range rs {
		r.proxy.SetOutage(false)
	}
	poll.Sleep(ctx, sched.After)
	for deadline := start.Add(sched.Warmup + sched.Before + sched.Outage + sched.AfterMax); time.Now().Before(deadline) && ctx.Err() == nil; {
		all := true
		for _, r := range rs {
			all = all && r.allBack()
		}
		if all {
			break
		}
		poll.Sleep(ctx, 20*time.Millisecond)
	}
	for _, r := range rs {
		r.stop()
	}
	wg.Wait()
	stopSampling()
	<-sampled
	mark(numPhases)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*Result, len(rs))
	for i, r := range rs {
		if err := r.readBack(ctx, e.Client); err != nil {
			return nil, err
		}
		out[i] = r.res
	}
	return out, nil
}

// runner is one run in progress.
type runner struct {
	sched  Schedule
	run    Run
	inst   *Instance
	proxy  *faultproxy.Proxy
	wire   *reqcount.Counter
	cms    corev1client.ConfigMapInterface
	ns     string
	prefix string
	q      workqueue.TypedRateLimitingInterface[int]
	res    *Result

	begin time.Time
	// stopCtx ends when no call may start any more; callCtx ends a grace
	// period later, bounding the calls still in flight.
	stopCtx, callCtx       context.Context
	stopCalls, cancelCalls context.CancelFunc

	mu     sync.Mutex
	back   []bool // per worker: a call that returned after the outage succeeded
	seq    []int
	stored []*corev1.ConfigMap // per worker: what its last call stored, for Run.Stored
	after  bool                // the outage has ended
}

// shutdownGrace bounds the calls in flight when a run stops.
const shutdownGrace = 15 * time.Second

func (e *Env) newRunner(ctx context.Context, sched Schedule, run Run) (*runner, error) {
	if run.Workers > 0 {
		sched.Workers = run.Workers
	}
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		return nil, err
	}
	r := &runner{
		sched: sched, run: run, inst: run.Policy.New(), proxy: proxy, wire: &reqcount.Counter{},
		ns: e.Namespace, prefix: fmt.Sprintf("outage-%d", e.runs.Add(1)),
		back: make([]bool, sched.Workers), seq: make([]int, sched.Workers), stored: make([]*corev1.ConfigMap, sched.Workers),
		res: &Result{Caller: run.Caller, Policy: run.Policy.Name, Sched: sched},
	}
	r.res.HasBudget = r.inst.Budget != nil
	for w := range sched.Workers {
		if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: r.name(w)},
			Data:       map[string]string{countKey: "0"},
		}, metav1.CreateOptions{}); err != nil {
			proxy.Close()
			return nil, fmt.Errorf("create configmap: %w", err)
		}
	}
	// The server's own config (its TLS settings name the server) through
	// the proxy.
	cfg := r.inst.Config(e.Config, r.wire)
	cfg.Host = "https://" + proxy.Addr()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		proxy.Close()
		return nil, err
	}
	r.cms = cs.CoreV1().ConfigMaps(e.Namespace)
	return r, nil
}

func (r *runner) name(w int) string { return fmt.Sprintf("%s-w%02d", r.prefix, w) }

func (r *runner) since() time.Duration { return time.Since(r.begin) }

// start starts the runner's workers. Its worker w is worker first+w of
// all the runs' all workers, whose first calls Spread spreads.
func (r *runner) start(ctx context.Context, begin time.Time, wg *sync.WaitGroup, first, all int) {
	r.begin = begin
	r.res.Begin = begin
	r.stopCtx, r.stopCalls = context.WithCancel(ctx)
	r.callCtx, r.cancelCalls = context.WithCancel(ctx)
	r.q = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	for w := range r.sched.Workers {
		r.q.AddAfter(w, r.sched.firstCall(first+w, all))
	}
	for range r.sched.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker()
		}()
	}
}

// stop lets no call start from now on, and ends the calls still in
// flight after shutdownGrace.
func (r *runner) stop() {
	r.stopCalls()
	r.q.ShutDown()
	time.AfterFunc(shutdownGrace, r.cancelCalls)
}

func (r *runner) mark(p Phase) {
	at := r.since()
	if p == numPhases {
		r.cancelCalls()
	}
	r.mu.Lock()
	r.res.Bounds[p] = at
	r.res.Requests[p] = r.wire.Snapshot()
	r.res.Proxy[p] = r.proxy.Stats()
	if r.inst.Budget != nil {
		r.res.Budget[p] = r.inst.Budget.Stats()
	}
	if p == After {
		r.after = true
		clear(r.back)
	}
	r.mu.Unlock()
}

func (r *runner) sample() {
	s := Sample{At: r.since(), Requests: r.wire.Snapshot().Resource("configmaps")}
	r.mu.Lock()
	r.res.Samples = append(r.res.Samples, s)
	r.mu.Unlock()
}

func (r *runner) allBack() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.after {
		return false
	}
	for _, ok := range r.back {
		if !ok {
			return false
		}
	}
	return true
}

// worker is one worker of the controller: it takes a key, makes a call,
// and requeues the key as a reconciler would: after a success, Pace
// later; after a failure, through the queue's rate limiter (LoopQueue:
// per-key exponential backoff from 5ms, 10 per second overall after a
// burst of 100) or Pause later. It stops when the queue shuts down.
func (r *runner) worker() {
	for {
		w, shutdown := r.q.Get()
		if shutdown {
			return
		}
		if r.stopCtx.Err() != nil {
			r.q.Done(w)
			continue // until the queue, shut down, hands out no more
		}
		err := r.call(w)
		switch {
		case err == nil:
			r.q.Forget(w)
			r.q.AddAfter(w, r.sched.Pace)
		case r.run.Caller == LoopQueue:
			r.q.AddRateLimited(w)
		default:
			r.q.Forget(w)
			r.q.AddAfter(w, r.sched.Pause)
		}
		r.q.Done(w)
	}
}

// call adds worker w's next key to its ConfigMap with Update, through the
// caller's loop (or none) and the policy.
func (r *runner) call(w int) error {
	r.mu.Lock()
	c := Call{Worker: w, Seq: r.seq[w]}
	r.seq[w]++
	current := r.stored[w]
	r.mu.Unlock()
	var sent atomic.Bool
	ctx := httptrace.WithClientTrace(r.callCtx, &httptrace.ClientTrace{
		GetConn: func(string) { sent.Store(true) },
	})
	update := func(ctx context.Context) error {
		cm, err := typedUpdate(ctx, r.cms, r.name(w), current, mutate(c.Seq))
		if err == nil && r.run.Stored {
			r.mu.Lock()
			r.stored[w] = cm
			r.mu.Unlock()
		}
		return err
	}
	c.Start = r.since()
	var err error
	if r.run.Caller == Plain {
		err = update(r.inst.callContext(ctx))
	} else {
		err = r.inst.Do(ctx, update)
	}
	c.End, c.Err, c.Sent = r.since(), err, sent.Load()
	c.Shutdown = err != nil && r.callCtx.Err() != nil
	r.mu.Lock()
	r.res.Calls = append(r.res.Calls, c)
	if err == nil && r.after {
		r.back[w] = true
	}
	r.mu.Unlock()
	return err
}

// mutate adds the call's key and counts it, unless the key is there
// already: a write that landed although its answer was lost is found by
// the next read, which then writes nothing. So a call applied twice
// shows as a count above the keys present.
func mutate(seq int) func(*corev1.ConfigMap) error {
	key := callKey(seq)
	return func(cm *corev1.ConfigMap) error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if _, ok := cm.Data[key]; ok {
			return nil
		}
		n, err := strconv.Atoi(cm.Data[countKey])
		if err != nil {
			return fmt.Errorf("outage: count %q of configmap %s: %w", cm.Data[countKey], cm.Name, err)
		}
		cm.Data[key] = strconv.Itoa(seq)
		cm.Data[countKey] = strconv.Itoa(n + 1)
		return nil
	}
}

func (r *runner) readBack(ctx context.Context, c kubernetes.Interface) error {
	r.res.Data = make([]map[string]string, r.sched.Workers)
	for w := range r.sched.Workers {
		cm, err := c.CoreV1().ConfigMaps(r.ns).Get(ctx, r.name(w), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read configmap back: %w", err)
		}
		r.res.Data[w] = cm.Data
	}
	return nil
}
